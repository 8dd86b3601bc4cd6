// ort_run.js: run an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU)
// on one .npy input and write its outputs as .npy - the independent reference
// of the ONNX tests (tests/onnx_digits.sh, tests/onnx_nodes.sh).
// usage: NODE_PATH=DIR/node_modules node ort_run.js MODEL.onnx IN.npy[,IN2.npy...] OUT.npy [OUTPUT_NAME OUT2.npy ...]
// The inputs feed the model's inputs in order; the first OUT.npy receives the
// model's first output; named outputs follow.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const ort = require('onnxruntime-node');

const DT = { '<f4': ['float32', Float32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
             '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array] };

function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(path + ': not a .npy file');
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const h = b.toString('latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(h)[1];
  if (/'fortran_order':\s*True/.test(h)) throw new Error(path + ': Fortran order');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(h)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const [type, Arr] = DT[descr] || (() => { throw new Error(path + ': dtype ' + descr); })();
  const data = b.subarray(off + hlen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  return new ort.Tensor(type, new Arr(copy.buffer), shape);
}

function writeNpy(path, t) {
  let data = t.data, descr;
  if (t.type === 'int64') { data = Int32Array.from(t.data, v => Number(v)); descr = '<i4'; }
  else descr = { float32: '<f4', uint8: '|u1', int8: '|i1', int32: '<i4' }[t.type];
  if (!descr) throw new Error('output type ' + t.type);
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  while ((10 + h.length + 1) % 64) h += ' ';
  h += '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(h.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(h, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

(async () => {
  const [model, inp, out, ...named] = process.argv.slice(2);
  const opts = { graphOptimizationLevel: 'all', intraOpNumThreads: 1 };
  // int8 weights moved to uint8 first: ORT's u8 x s8 kernel saturates on AVX2-only CPUs
  // (scripts/onnx/ort_exact.py says why); the result is the model's exact integers.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_exact-'));
  const exact = path.join(tmp, 'model.onnx');
  let s;
  try {
    execFileSync('/usr/bin/python3', [path.join(__dirname, 'ort_exact.py'), model, exact], { stdio: ['ignore', 'ignore', 'inherit'] });
    s = await ort.InferenceSession.create(exact, opts);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const feeds = {};
  const ins = inp.split(',');
  if (ins.length !== s.inputNames.length) throw new Error(`${ins.length} inputs for ${s.inputNames.length}`);
  ins.forEach((f, i) => { feeds[s.inputNames[i]] = readNpy(f); });
  const res = await s.run(feeds);
  writeNpy(out, res[s.outputNames[0]]);
  for (let i = 0; i + 1 < named.length; i += 2) writeNpy(named[i + 1], res[named[i]]);
})().catch(e => { console.error('ort_run: ' + e.message); process.exit(1); });

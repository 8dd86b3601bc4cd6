// ort_run.js: run an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU)
// on one .npy input and write its outputs as .npy - the independent reference
// of the ONNX tests (tests/onnx_digits.sh, tests/onnx_nodes.sh).
// usage: NODE_PATH=DIR/node_modules node ort_run.js [OPTIONS] MODEL.onnx IN.npy[,IN2.npy...] OUT.npy [OUTPUT_NAME OUT2.npy ...]
// The inputs feed the model's inputs in order; the first OUT.npy receives the
// model's first output; named outputs follow.
// Options (before MODEL; used by scripts/zoo, which runs ~100 inputs per model
// and would otherwise start node and Python once per input):
//   --batch        each IN.npy holds samples along its first axis; the model runs
//                  once per sample (IN[i:i+1], so a batch-1 model fits) and each
//                  output is the samples' outputs concatenated along axis 0
//   --opt LEVEL    graph optimisation: all (default), extended, basic or disabled
//   --as-is        run MODEL itself, without ort_exact.py's int8 -> uint8 weight move
//                  (to show that ORT accepts the file exactly as written)
//   --s8-as-u8     ort_exact.py --s8-as-u8: int8 activation Q/DQ pairs moved to uint8 too, so
//                  every QDQ conv runs as a QLinearConv (ort_exact.py says why)
//   --minmax       OUT is a .json file instead: {output name: [min, max]} of every
//                  output over every sample (a MinMax calibration pass)
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

// The samples of an input along its first axis, each as a tensor [1, ...rest].
function samples(t) {
  const n = t.dims[0], per = t.data.length / n, rest = t.dims.slice(1);
  const out = [];
  for (let i = 0; i < n; i++) out.push(new ort.Tensor(t.type, t.data.slice(i * per, (i + 1) * per), [1, ...rest]));
  return out;
}

// Outputs of several runs concatenated along axis 0.
function concat(ts) {
  if (ts.length === 1) return ts[0];
  const n = ts.reduce((a, t) => a + t.data.length, 0);
  const data = new ts[0].data.constructor(n);
  let off = 0;
  for (const t of ts) { data.set(t.data, off); off += t.data.length; }
  const dims = ts[0].dims.slice();
  dims[0] = ts.reduce((a, t) => a + t.dims[0], 0);
  return new ort.Tensor(ts[0].type, data, dims);
}

(async () => {
  const argv = process.argv.slice(2);
  const flags = { batch: false, opt: 'all', asIs: false, minmax: false, s8AsU8: false };
  while (argv.length && argv[0].startsWith('--')) {
    const f = argv.shift();
    if (f === '--batch') flags.batch = true;
    else if (f === '--as-is') flags.asIs = true;
    else if (f === '--minmax') flags.minmax = true;
    else if (f === '--s8-as-u8') flags.s8AsU8 = true;
    else if (f === '--opt' && ['all', 'extended', 'basic', 'disabled'].includes(argv[0])) flags.opt = argv.shift();
    else throw new Error('unknown option ' + f);
  }
  const [model, inp, out, ...named] = argv;
  if (!model || !inp || !out) throw new Error('usage: ort_run.js [--batch] [--opt L] [--as-is] [--minmax] [--s8-as-u8] MODEL IN.npy OUT');
  if (flags.asIs && flags.s8AsU8) throw new Error('--as-is and --s8-as-u8 exclude each other');
  const opts = { graphOptimizationLevel: flags.opt, intraOpNumThreads: 1 };
  // int8 weights moved to uint8 first: ORT's u8 x s8 kernel saturates on AVX2-only CPUs
  // (scripts/onnx/ort_exact.py says why); the result is the model's exact integers.
  let s;
  if (flags.asIs) {
    s = await ort.InferenceSession.create(model, opts);
  } else {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_exact-'));
    const exact = path.join(tmp, 'model.onnx');
    try {
      execFileSync('/usr/bin/python3', [path.join(__dirname, 'ort_exact.py'), ...(flags.s8AsU8 ? ['--s8-as-u8'] : []), model, exact], { stdio: ['ignore', 'ignore', 'inherit'] });
      s = await ort.InferenceSession.create(exact, opts);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  const ins = inp.split(',').map(readNpy);
  if (ins.length !== s.inputNames.length) throw new Error(`${ins.length} inputs for ${s.inputNames.length}`);
  const runs = flags.batch ? ins.map(samples) : ins.map(t => [t]);
  const nrun = runs[0].length;
  if (runs.some(r => r.length !== nrun)) throw new Error('--batch: the inputs hold different numbers of samples');
  const results = [];
  const range = {};
  for (let i = 0; i < nrun; i++) {
    const feeds = {};
    s.inputNames.forEach((name, k) => { feeds[name] = runs[k][i]; });
    const res = await s.run(feeds);
    if (flags.minmax) {
      // min/max of each output here, not all outputs kept: a calibration pass
      // asks for every intermediate tensor of the network
      for (const name of s.outputNames) {
        const d = res[name].data;
        let lo = Infinity, hi = -Infinity;
        for (let j = 0; j < d.length; j++) { const v = Number(d[j]); if (v < lo) lo = v; if (v > hi) hi = v; }
        const r = range[name] || (range[name] = [Infinity, -Infinity]);
        if (lo < r[0]) r[0] = lo;
        if (hi > r[1]) r[1] = hi;
      }
    } else {
      results.push(res);
    }
  }
  if (flags.minmax) {
    const tmpOut = out + '.part.' + process.pid;
    fs.writeFileSync(tmpOut, JSON.stringify(range));
    fs.renameSync(tmpOut, out);
    return;
  }
  writeNpy(out, concat(results.map(r => r[s.outputNames[0]])));
  for (let i = 0; i + 1 < named.length; i += 2) writeNpy(named[i + 1], concat(results.map(r => r[named[i]])));
})().catch(e => { console.error('ort_run: ' + e.message); process.exit(1); });

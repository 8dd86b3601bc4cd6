#!/usr/bin/python3
"""test_op_shuffle.py TESSERA WORKDIR [BACKEND]: ShuffleNetV2's channel shuffle as torch exports it
(Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose perm [0, 2, 1, 3, 4], Reshape back), quantized
as quantize_static writes it (u8 and s8: the Reshapes and the Transpose keep their input's scale),
against ONNX Runtime.

Bounds: a permutation of quantized bytes is exact, so the shuffle alone (between convs whose outputs
tessera and ORT both requantize) must match ORT exactly where the convs do; the whole block is held
to the convs' bound (<= 1 LSB per operator, test_op_conv.py), the shuffled output alone to 0.
By default (onnx/ops/tsr_ox_shuffle.c: the shuffle and the chunk's Slices as device 1x1 convs with
one-hot weights and an identity requantization, a Slice of the shuffle composed onto the shuffle's
input, a selection read by a 1x1 conv composed into its weights) the outputs must equal the host
permutation's (--place shuffle=host) byte for byte and the unit must run in one device segment, also
when its halves (10 + 10 channels) are no multiple of BLOCK (the first half padded to 32 channels).
"""
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import oxtest as T  # noqa: E402

rng = np.random.default_rng(30)


def export(mod, x, path):
    import torch
    with torch.no_grad():
        torch.onnx.export(mod, (torch.from_numpy(x),), path, opset_version=13, input_names=["x"],
                          output_names=["y"])
    return onnx.load(path)


def on_device(run):
    """run() with --place shuffle=device (the default: the shuffle and channel slices as one-hot 1x1
    device convs, composed where they meet)."""
    with T.placed("shuffle=device"):
        return run()


def on_host(run):
    """run() with --place shuffle=host (the quantized bytes permuted on the host)."""
    with T.placed("shuffle=host"):
        return run()


def same(name, host, dev):
    """The device form's output bytes equal the host permutation's."""
    if host is None or dev is None or host.shape != dev.shape:
        T.check(f"{name}: device bytes = host bytes", False, "an output is missing or the shapes differ")
        return
    n = int((host != dev).sum())
    T.check(f"{name}: device bytes = host bytes", n == 0, f"{n} of {host.size} values differ")


def main():
    T.setup()
    import torch
    torch.manual_seed(0)

    def shuffle(x, g):
        n, c, h, w = x.shape
        return x.view(n, g, c // g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)

    class Shuffle(torch.nn.Module):
        """conv -> shuffle: the graph output is the shuffled tensor (exact against ORT)."""
        def __init__(self, c, g):
            super().__init__()
            self.conv, self.g = torch.nn.Conv2d(c, c, 1), g

        def forward(self, x):
            return shuffle(self.conv(x), self.g)

    class Block(torch.nn.Module):
        """ShuffleNetV2's stride-1 unit: chunk, a branch of convs, cat, shuffle, then a conv reads it."""
        def __init__(self, c):
            super().__init__()
            h = c // 2
            self.pre = torch.nn.Conv2d(c, c, 1)
            self.b1 = torch.nn.Conv2d(h, h, 1)
            self.dw = torch.nn.Conv2d(h, h, 3, padding=1, groups=h)
            self.b2 = torch.nn.Conv2d(h, h, 1)
            self.post = torch.nn.Conv2d(c, c, 1)

        def forward(self, x):
            x = self.pre(x)
            a, b = x.chunk(2, dim=1)
            y = torch.cat((a, torch.relu(self.b2(self.dw(torch.relu(self.b1(b)))))), 1)
            return self.post(shuffle(y, 2))

    for c, g, hw in ((16, 2, 8), (24, 3, 6), (48, 2, 5)):
        x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
        cal = rng.standard_normal((16, c, hw, hw)).astype(np.float32)
        fm = export(Shuffle(c, g).eval(), x, f"shuffle_c{c}_g{g}.onnx")
        for act in ("u8", "s8"):
            q = T.quantize(fm, cal, act)
            host = on_host(lambda: T.against_ort(f"shuffle c{c} g{g} {act}", q, x, max_lsb=0))
            dev = on_device(lambda: T.against_ort(f"shuffle c{c} g{g} {act} device", q, x, max_lsb=0))
            same(f"shuffle c{c} g{g} {act}", host, dev)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    cal = rng.standard_normal((16, 32, 8, 8)).astype(np.float32)
    fm = export(Block(32).eval(), x, "shuffle_block.onnx")
    for act in ("u8", "s8"):
        q = T.quantize(fm, cal, act)
        on_host(lambda: T.against_ort(f"shufflenet unit {act}", q, x, max_lsb=1))
        # on the host the bytes are permuted as they are: the Transpose's QuantizeLinear is a
        # relabelling (no host dequantize / float transpose / quantize)
        rc, out = on_host(lambda: T.placement(T.save(q, f"unit_{act}.onnx"), x))
        line = next((ln for ln in out.splitlines() if ln.split()[:2] == ["/Transpose_output_0_Quant...",
                                                                           "QuantizeLinear"]), "")
        T.check(f"shuffle on the quantized bytes {act}", rc == 0 and "relabel" in line, line or out[-300:])
        # the chunk (Slice) too: its QuantizeLinears are relabellings
        sl = [ln for ln in out.splitlines() if ln.split()[:2] in (["/Slice_output_0_QuantizeL...", "QuantizeLinear"],
                                                                  ["/Slice_1_output_0_Quantiz...", "QuantizeLinear"])]
        T.check(f"chunk on the quantized bytes {act}", rc == 0 and len(sl) == 2 and all("relabel" in ln for ln in sl),
                "; ".join(sl) or out[-300:])
        # by default: the chunk's Slices and the shuffle as one-hot 1x1 convs, the Concat (16 + 16
        # channels: aligned) as views, the whole unit in one segment, bytes = the host path's. The
        # Slice the branch's 1x1 conv reads is composed into that conv's weights, and so is the
        # shuffle into the conv after it: one selection conv is left (the half passed on)
        host = on_host(lambda: T.infer(f"unit_{act}.onnx", x)[1])
        dev = T.against_ort(f"shufflenet unit {act} device", q, x, max_lsb=1)
        same(f"shufflenet unit {act}", host, dev)
        rc, out = T.placement(f"unit_{act}.onnx", x)
        dv = {ln.split()[0]: ln for ln in out.splitlines() if ln.split()[:1] in (["/Slice"], ["/Slice_1"], ["/Transpose"])}
        T.check(f"chunk and shuffle on the device, one segment {act}",
                rc == 0 and " in 1 segment," in out and len(dv) == 3 and "device, segment 0 (conv)" in dv["/Slice"] and
                'folded into device op "/b1/Conv"' in dv["/Slice_1"] and
                'folded into device op "/post/Conv"' in dv["/Transpose"], "; ".join(dv.values()) or out[-300:])
    # halves of 10 channels (ShuffleNetV2's are 58, 116, 232): the Concat's offset is no multiple of
    # BLOCK, so the device form pads the first half (its slice conv and the Concat input's requantize)
    # to 32 channels of y_zp and the shuffle conv skips the padding: still one segment, the same bytes
    x = rng.standard_normal((1, 20, 6, 6)).astype(np.float32)
    cal = rng.standard_normal((16, 20, 6, 6)).astype(np.float32)
    fm = export(Block(20).eval(), x, "shuffle_block20.onnx")
    for act in ("u8", "s8"):
        q = T.quantize(fm, cal, act)
        path = T.save(q, f"unit20_{act}.onnx")
        host = on_host(lambda: T.infer(path, x)[1])
        dev = on_device(lambda: T.against_ort(f"shufflenet unit c20 {act} device", q, x, max_lsb=1))
        same(f"shufflenet unit c20 {act}", host, dev)
        rc, out = T.placement(path, x)
        cat = [ln for ln in out.splitlines() if ln.split()[:2] == ["/Concat", "Concat"]]
        T.check(f"unaligned concat padded, one segment {act}",
                rc == 0 and " in 1 segment," in out and len(cat) == 1 and "device, segment 0 (concat" in cat[0],
                "; ".join(cat) or out[-300:])
        # a padded tensor read by name: refused (its bytes hold the padding), not wrong values
        rc, _, err = T.infer(path, x, ("--tensor", "/Concat_output_0_QuantizeLinear_Output=cat.npy"))
        T.check(f"padded concat output not readable {act}", rc != 0 and "padding channels" in err, err[-200:])
    T.finish()


if __name__ == "__main__":
    main()

# gemm_relu.s: Y = clamp((relu(X * W^T)) >> 8, 127) in int8, on the default preset (1x16x16).
#
#   X: 4 x 32 int8 inputs       W: 32 x 32 int8 weights       Y: 4 x 32 int8 outputs
#
# Assemble and run:   tessera run --config default isa/examples/gemm_relu.s
#
# ---- How the data is tiled (default preset: BATCH=1, BLOCK_IN=BLOCK_OUT=16) ----
# One DRAM element of a memory type is one on-chip row:
#   inp element = 1 x 16 int8 (16 bytes), wgt element = 16 x 16 int8 (256 bytes, [o][i]),
#   acc row = 1 x 16 int32, out element = 1 x 16 int8 (16 bytes).
# With M = 4 rows, K = 2 reduction blocks and N = 2 output blocks:
#   inp element  m*K + k  holds X[m][16k .. 16k+15]            (X row-major, as is)
#   wgt element  n*K + k  holds W[16n+o][16k+i] at [o][i]      (W blocked 16x16)
#   acc/out row  m*N + n  holds Y[m][16n .. 16n+15]            (Y row-major, as is)
#
# ---- Tokens ----
# Three stages run concurrently: load (LOAD inp/wgt), compute (LOAD uop/acc, GEMM, ALU,
# FINISH) and store (STORE). Within a stage instructions run in order; across stages
# only tokens order them. Here every token pushed is popped exactly once:
#   load    --push_next--> compute  (pop_prev):  X and W are on chip before the GEMM
#   compute --push_next--> store    (pop_prev):  Y is final before it is stored
#   store   --push_prev--> compute  (pop_next):  the store is done before FINISH

# ---- Buffers (placed automatically from 0x100000, one 4 KiB page each) ----
.buffer inp 128 random 1       # X: 8 inp elements of 16 bytes, deterministic random int8
.buffer wgt 1024 random 2      # W: 4 wgt elements of 256 bytes
.buffer out 128                # Y: 8 out elements of 16 bytes, zero-filled
.output out                    # `tessera run` dumps this buffer when done

# Micro-ops "dst,src,wgt" (acc row, inp row, wgt row), loaded into the uop buffer:
#   uop 0 = 0,0,0   k = 0 block of the GEMM kernel; alone, the "visit acc row" kernel
#   uop 1 = 0,1,1   k = 1 block of the GEMM kernel
.uops kernel 0,0,0 0,1,1

# ---- compute: fetch the micro-ops, clear the 8 accumulator rows ----
load uop sram=0 dram=kernel y=1 x=2 stride=2
# reset: acc[0 + j*1] = 0 for j in 0..7
gemm reset uop=0:1 iter=1,8 dst=0,1 src=0,0 wgt=0,0

# ---- load: X into inp rows 0..7, W into wgt rows 0..3, then signal compute ----
load inp sram=0 dram=inp y=1 x=8 stride=8
load wgt sram=0 dram=wgt y=1 x=4 stride=4 push_next

# ---- compute: the matrix product, a 2-D loop over (m, n) around the K-block kernel ----
# For m in 0..3 (outer), n in 0..1 (inner), uop k in {0, 1}:
#   acc[m*2 + n] += inp[m*2 + k] . wgt[n*2 + k]
# i.e. dst = uop.dst + 2m + 1n, src = uop.src + 2m + 0n, wgt = uop.wgt + 0m + 2n.
gemm uop=0:2 iter=4,2 dst=2,1 src=2,0 wgt=0,2 pop_prev

# ---- compute: requantize each of the 8 acc rows in place (imm given => use_imm=1) ----
alu max uop=0:1 iter=1,8 dst=0,1 src=0,1 imm=0      # relu: max(acc, 0)
alu shr uop=0:1 iter=1,8 dst=0,1 src=0,1 imm=8      # scale: acc >> 8
alu min uop=0:1 iter=1,8 dst=0,1 src=0,1 imm=127 push_next   # saturate to int8, then signal store

# ---- store: out rows 0..7 (the low 8 bits of each acc value) to Y, then signal compute ----
store out sram=0 dram=out y=1 x=8 stride=8 pop_prev push_prev

# ---- compute: wait for the store, end the run ----
finish pop_next

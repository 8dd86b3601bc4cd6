.buffer inp 128 random 1
.buffer out 64 @0x200000
.uops k 0,0,0 0,1,1
.output out
load uop sram=0 dram=k y=1 x=2 stride=2
gemm reset uop=0:1 iter=1,4 dst=0,1 src=0,0 wgt=0,0
load inp sram=0 dram=inp+2 y=2 x=4 stride=4 pad=1,1,0,0 push_next
gemm uop=0:2 iter=2,2 dst=2,1 src=2,0 wgt=0,2 pop_prev
alu max uop=0:1 iter=1,4 dst=0,1 src=0,1 imm=0 push_next # relu
store out sram=0 dram=out y=1 x=4 stride=4 pop_prev push_prev
finish pop_next

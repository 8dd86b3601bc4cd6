.buffer a 4096 @0x100000 zero
.buffer b 8192 file data.bin
.buffer c 16 random 0xffff
.uops u 1,2,3
.output c
load wgt sram=0 dram=a y=1 x=1 stride=1
finish

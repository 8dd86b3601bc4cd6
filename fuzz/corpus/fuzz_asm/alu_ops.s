alu mulhr reset=0 uop=0:1 iter=1,1 dst=0,0 src=0,0 use_imm=1 imm=-3
load acc8 sram=3 dram=0x40 y=1 x=16 stride=16 pad=0,0,0,0 pop_prev pop_next
alu rqfin uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=0x1234
alu rshr uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=3
load inp sram=0 dram=0 y=1 x=16 stride=16 pad=1,1,1,1 pad_value=-5
finish

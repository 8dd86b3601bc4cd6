# Zynq block design, implementation and export of .bit + .hwh (PYNQ overlay).
# Usage: vivado -mode batch -source build_zynq.tcl -tclargs GENDIR IPDIR OUTDIR
#   GENDIR: scripts/fpga/gen_flow.py output for a Zynq board (params.tcl:
#           part, ps7 or ps8, clock); IPDIR: package_ip.tcl output.
# The design: the processing system; a PL clock at the board's accelerator
# clock; the accelerator's AXI4-Lite registers on a general-purpose master
# port (GP0 / HPM0_FPD) through an interconnect; its AXI4 master on a
# high-performance slave port (HP0 / HP0_FPD) to the PS DRAM, where the
# zynq backend's u-dma-buf lives; its interrupt on the PS's IRQ_F2P.
# On the board: load OUTDIR/tessera.bit with PYNQ's Overlay (it reads the
# .hwh) or fpgautil, bind the register window to generic-uio under the
# name "tessera" and load u-dma-buf; then `--backend zynq`.
# Needs Vivado (not on the Tessera CI machines: untested here).
set gendir [lindex $argv 0]
set ipdir  [lindex $argv 1]
set outdir [lindex $argv 2]
source $gendir/params.tcl
if {$tsr_ps eq "none"} { error "build_zynq: $tsr_board has no processing system (use scripts/fpga/vitis)" }

create_project tessera_bd $outdir/prj -part $tsr_part -force
set_property ip_repo_paths $ipdir [current_project]
update_ip_catalog
create_bd_design tessera

if {$tsr_ps eq "ps7"} {
  set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:processing_system7 ps]
  apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 -config {make_external "FIXED_IO, DDR"} $ps
  set_property -dict [list CONFIG.PCW_USE_S_AXI_HP0 1 CONFIG.PCW_S_AXI_HP0_DATA_WIDTH $tsr_bus_bits \
    CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ $tsr_clock_mhz CONFIG.PCW_USE_FABRIC_INTERRUPT 1 \
    CONFIG.PCW_IRQ_F2P_INTR 1] $ps
  set gp M_AXI_GP0; set hp S_AXI_HP0; set clk FCLK_CLK0; set irq IRQ_F2P
} else {
  set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:zynq_ultra_ps_e ps]
  apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e -config {apply_board_preset "1"} $ps
  set_property -dict [list CONFIG.PSU__USE__S_AXI_GP2 1 CONFIG.PSU__SAXIGP2__DATA_WIDTH $tsr_bus_bits \
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ $tsr_clock_mhz CONFIG.PSU__USE__IRQ0 1] $ps
  set gp M_AXI_HPM0_FPD; set hp S_AXI_HP0_FPD; set clk pl_clk0; set irq pl_ps_irq0
}
set acc [create_bd_cell -type ip -vlnv tessera:ip:tsr_kernel:1.0 tessera]
# GP master -> accelerator registers; accelerator master -> HP port (DRAM).
apply_bd_automation -rule xilinx.com:bd_rule:axi4 -config [list Master /ps/$gp Clk_master /ps/$clk Clk_slave /ps/$clk] \
  [get_bd_intf_pins tessera/s_axi_control]
apply_bd_automation -rule xilinx.com:bd_rule:axi4 -config [list Slave /ps/$hp Clk_master /ps/$clk Clk_slave /ps/$clk] \
  [get_bd_intf_pins tessera/m_axi_gmem]
connect_bd_net [get_bd_pins tessera/interrupt] [get_bd_pins ps/$irq]
assign_bd_address
validate_bd_design
save_bd_design

make_wrapper -files [get_files tessera.bd] -top
add_files -norecurse [glob $outdir/prj/tessera_bd.gen/sources_1/bd/tessera/hdl/tessera_wrapper.v]
set_property top tessera_wrapper [current_fileset]
launch_runs impl_1 -to_step write_bitstream -jobs 4
wait_on_run impl_1
if {[get_property PROGRESS [get_runs impl_1]] ne "100%"} { error "build_zynq: implementation failed" }
file copy -force [glob $outdir/prj/tessera_bd.runs/impl_1/*.bit] $outdir/tessera.bit
file copy -force [glob $outdir/prj/tessera_bd.gen/sources_1/bd/tessera/hw_handoff/tessera.hwh] $outdir/tessera.hwh
open_run impl_1
report_utilization -file $outdir/utilization.txt
report_timing_summary -file $outdir/timing.txt
puts "build_zynq: $outdir/tessera.bit + tessera.hwh for $tsr_board ($tsr_part) at $tsr_clock_mhz MHz"

# Package the RTL as a Vitis RTL kernel (tessera.xo) for an Alveo card.
# Usage: vivado -mode batch -source package_xo.tcl -tclargs GENDIR IPDIR XO
#   GENDIR: scripts/fpga/gen_flow.py output for an Alveo board (kernel.xml
#           from isa/tsr_regs.c: ap_ctrl_hs, the arguments insns/count at
#           their register offsets; link.cfg); IPDIR: package_ip.tcl output.
# Then link for the card's platform:
#   v++ -l -t hw --platform <xilinx_u250_... platform> --config GENDIR/link.cfg -o tessera.xclbin tessera.xo
# and run with TESSERA_XCLBIN=tessera.xclbin `--backend xrt`.
# Needs Vivado/Vitis (not on the Tessera CI machines: untested here).
set gendir [lindex $argv 0]
set ipdir  [lindex $argv 1]
set xo     [lindex $argv 2]
source $gendir/params.tcl
# Vitis requires the ap_ctrl_hs control protocol and the kernel's interface
# names (ap_clk, s_axi_control, m_axi_gmem), which tsr_kernel provides.
set core [ipx::open_core $ipdir/component.xml]
set_property sdx_kernel true $core
set_property sdx_kernel_type rtl $core
ipx::save_core $core
package_xo -xo_path $xo -kernel_name tessera -ip_directory $ipdir -kernel_xml $gendir/kernel.xml -force
puts "package_xo: $xo for $tsr_board"

# Package the Tessera RTL as a Vivado IP (tessera:ip:tsr_kernel:1.0).
# Usage: vivado -mode batch -source package_ip.tcl -tclargs GENDIR IPDIR
#   GENDIR: output of scripts/fpga/gen_flow.py (tsr_pkg.sv, params.tcl)
# tsr_kernel (hw/fpga) wraps tsr_top with the names IP-XACT inference
# understands: s_axi_control_* becomes an AXI4-Lite slave, m_axi_gmem_* an
# AXI4 master, ap_clk/ap_rst_n the clock and reset, interrupt an interrupt.
# Needs Vivado (not on the Tessera CI machines: untested here).
set gendir [lindex $argv 0]
set ipdir  [lindex $argv 1]
set root   [file normalize [file dirname [info script]]/../../..]
source $gendir/params.tcl

create_project -in_memory -part $tsr_part
read_verilog -sv [list $gendir/tsr_pkg.sv {*}[glob $root/hw/rtl/*.sv] {*}[glob $root/hw/rtl/*.svh] $root/hw/fpga/tsr_kernel.sv]
set_property top tsr_kernel [current_fileset]
update_compile_order -fileset sources_1

ipx::package_project -root_dir $ipdir -vendor tessera -library ip -taxonomy /UserIP -import_files
set core [ipx::current_core]
set_property name tsr_kernel $core
set_property version 1.0 $core
# The clock drives both interfaces; reset is active low.
ipx::associate_bus_interfaces -busif s_axi_control -clock ap_clk $core
ipx::associate_bus_interfaces -busif m_axi_gmem -clock ap_clk $core
set_property value ACTIVE_LOW [ipx::get_bus_parameters POLARITY -of_objects [ipx::get_bus_interfaces ap_rst_n -of_objects $core]]
# The register window: 4 KiB at the slave's base (the map decodes 8 bits).
ipx::add_memory_map s_axi_control $core
set_property slave_memory_map_ref s_axi_control [ipx::get_bus_interfaces s_axi_control -of_objects $core]
ipx::add_address_block reg0 [ipx::get_memory_maps s_axi_control -of_objects $core]
set_property range 4096 [ipx::get_address_blocks reg0 -of_objects [ipx::get_memory_maps s_axi_control -of_objects $core]]
ipx::create_xgui_files $core
ipx::update_checksums $core
ipx::save_core $core
puts "package_ip: tsr_kernel packaged in $ipdir for $tsr_part"

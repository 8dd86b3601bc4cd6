// tsr_uart_tx: 8N1 UART transmitter for the iCE40 board wrapper. A byte is
// taken when valid_i and ready_o are both high and shifted out LSB first
// between a start and a stop bit.
module tsr_uart_tx #(
  parameter int ClkHz = 12000000,
  parameter int Baud  = 115200,
  localparam int Div = ClkHz / Baud,
  localparam int CW  = $clog2(Div + 1)
) (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic       valid_i,
  output logic       ready_o,
  input  logic [7:0] data_i,
  output logic       tx_o
);
  logic [9:0]    sh_q, sh_d;    // stop, data[7:0], start; shifted out from bit 0
  logic [3:0]    left_q, left_d;  // bits still to send
  logic [CW-1:0] cnt_q, cnt_d;

  assign ready_o = (left_q == '0);
  assign tx_o = (left_q == '0) ? 1'b1 : sh_q[0];

  always_comb begin
    sh_d   = sh_q;
    left_d = left_q;
    cnt_d  = cnt_q;
    if (left_q == '0) begin
      if (valid_i) begin
        sh_d   = {1'b1, data_i, 1'b0};
        left_d = 4'd10;
        cnt_d  = CW'(Div - 1);
      end
    end else if (cnt_q == '0) begin
      sh_d   = {1'b1, sh_q[9:1]};
      left_d = left_q - 4'd1;
      cnt_d  = CW'(Div - 1);
    end else cnt_d = cnt_q - CW'(1);
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      sh_q   <= '1;
      left_q <= '0;
      cnt_q  <= '0;
    end else begin
      sh_q   <= sh_d;
      left_q <= left_d;
      cnt_q  <= cnt_d;
    end
  end
endmodule

// tsr_uart_rx: 8N1 UART receiver for the iCE40 board wrapper. The input is
// synchronised through two flip-flops, a start bit is confirmed at its
// middle, then each data bit is sampled at its middle; a byte is offered for
// one cycle (valid_o) when its stop bit has been seen high (a framing error
// drops the byte: the host protocol resynchronises on its own).
module tsr_uart_rx #(
  parameter int ClkHz = 12000000,
  parameter int Baud  = 115200,
  localparam int Div = ClkHz / Baud,
  localparam int CW  = $clog2(Div + 1)
) (
  input  logic       clk_i,
  input  logic       rst_ni,
  input  logic       rx_i,
  output logic       valid_o,
  output logic [7:0] data_o
);
  typedef enum logic [1:0] {Idle, Start, Data, Stop} state_e;
  state_e      state_q, state_d;
  logic [1:0]  sync_q;
  logic [CW-1:0] cnt_q, cnt_d;
  logic [2:0]  bit_q, bit_d;
  logic [7:0]  sh_q, sh_d;
  logic        valid_d, valid_q;
  logic        rx;

  assign rx = sync_q[1];
  assign valid_o = valid_q;
  assign data_o = sh_q;

  always_comb begin
    state_d = state_q;
    cnt_d   = cnt_q;
    bit_d   = bit_q;
    sh_d    = sh_q;
    valid_d = 1'b0;
    case (state_q)
      Idle: if (!rx) begin
        state_d = Start;
        cnt_d   = CW'(Div / 2);
      end
      Start: if (cnt_q == '0) begin
        if (rx) state_d = Idle;  // a glitch, not a start bit
        else begin
          state_d = Data;
          cnt_d   = CW'(Div - 1);
          bit_d   = '0;
        end
      end else cnt_d = cnt_q - CW'(1);
      Data: if (cnt_q == '0) begin
        sh_d  = {rx, sh_q[7:1]};
        cnt_d = CW'(Div - 1);
        if (bit_q == 3'd7) state_d = Stop;
        else bit_d = bit_q + 3'd1;
      end else cnt_d = cnt_q - CW'(1);
      Stop: if (cnt_q == '0) begin
        state_d = Idle;
        valid_d = rx;
      end else cnt_d = cnt_q - CW'(1);
      default: state_d = Idle;
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= Idle;
      sync_q  <= 2'b11;
      cnt_q   <= '0;
      bit_q   <= '0;
      sh_q    <= '0;
      valid_q <= 1'b0;
    end else begin
      state_q <= state_d;
      sync_q  <= {sync_q[0], rx_i};
      cnt_q   <= cnt_d;
      bit_q   <= bit_d;
      sh_q    <= sh_d;
      valid_q <= valid_d;
    end
  end
endmodule

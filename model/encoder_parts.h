// Where an encoder frame's time goes (bench --roofline's split): while an EncoderPartClock is
// alive, the Hiera encoder adds the wall time of its linear layers (patch embedding, qkv,
// projections, MLP) and of its attention cores (global and mask-unit apart) to one
// EncoderPartTimes. What is left of the encoder's time is the rest: norms, unroll and
// reroll, pooling, residual adds. Timed on the CPU only, where every op returns when it is
// done; on a GPU the ops are asynchronous and nothing is recorded. One clock at a time per
// process (it is global, not per thread: the engine may run the model on a worker thread).
#pragma once

namespace corridorkey::model {

struct EncoderPartTimes {
  double linear_ms = 0, global_attention_ms = 0, windowed_attention_ms = 0;
  int calls = 0;  // timed calls, so that a caller can tell nothing was timed (a GPU frame)
};

class EncoderPartClock {
 public:
  explicit EncoderPartClock(EncoderPartTimes& into);
  ~EncoderPartClock();
  EncoderPartClock(const EncoderPartClock&) = delete;
  EncoderPartClock& operator=(const EncoderPartClock&) = delete;
};

}  // namespace corridorkey::model

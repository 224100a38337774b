//! What a load is told and what a run reports: [`LoadOptions`], the
//! [`LoadProgress`] of a load, and the [`RunTimes`] of the runs since.

/// How [`crate::device::Runtime::load_with`] loads a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Rewrite each delegate's op chain with [`etwgpu_graph::fuse()`] before
    /// lowering (the default); off runs every op as exported, for
    /// debugging (`etwgpu run --no-fuse`).
    pub fuse: bool,
    /// Store float32 KV caches (those of `sdpa_with_kv_cache`) in float16
    /// on devices with SHADER_F16, halving their memory and the bytes
    /// attention reads; the attention math stays float32 (keys and values
    /// are rounded to float16 as they enter the cache). Off by default,
    /// so a program runs exactly as exported; `etwgpu_llm`'s generator
    /// turns it on. Ignored on devices without SHADER_F16 and for caches
    /// any other op reads.
    pub kv_cache_f16: bool,
    /// Which float32 matrix products may use f16 operands on devices with
    /// cooperative matrices (`etwgpu run --precision f32|mixed|f16`; see
    /// [`etwgpu_kernels::Precision`]); `None` (the default) takes the
    /// runtime's ([`crate::device::RuntimeOptions::precision`]:
    /// `ETWGPU_PRECISION`, else `mixed`).
    pub precision: Option<etwgpu_kernels::Precision>,
    /// Threads that record each run's dispatches, one command buffer each
    /// (a plan splits only at 96 or more dispatches a thread); `None` (the
    /// default) takes `ETWGPU_RECORD_THREADS`, else 2 (1 on hosts of fewer
    /// than 4 cores). One on the web.
    pub record_threads: Option<usize>,
    /// Whether a run with nothing in flight submits its first dispatches
    /// before recording the rest, so the GPU starts while the host records
    /// (plans of 48 dispatches or more); `None` (the default) takes
    /// `ETWGPU_EARLY_SUBMIT` (`0`: off), else on.
    pub early_submit: Option<bool>,
    /// Constants larger than this many bytes (on the device) are split by
    /// rows where they can be ([`etwgpu_graph::split`]: linear weights and
    /// embedding tables, one op per chunk), as those past the device's
    /// storage-binding limit always are; `None` (the default) splits only
    /// those, unless `ETWGPU_SPLIT_BYTES` gives a number. A lower value
    /// exercises the split path on a small model.
    pub split_bytes: Option<u64>,
    /// Let the kernels that have a subgroup form (the split-KV decode
    /// attention, `sdpa_split_sg.wgsl`) take it where the runtime has
    /// subgroups: `Some(true)` on, `Some(false)` off (tests, A/B
    /// comparisons), `None` (the default) as the runtime says, which is
    /// off unless `ETWGPU_SUBGROUPS=1`: on the H200 the subgroup form
    /// measured slower than the workgroup kernel (run ad: 0.38 against 0.33
    /// ms of attention a SmolLM2 token at position 0, 0.52 against 0.41 at
    /// 256).
    pub subgroups: Option<bool>,
    /// Which kernel 2-D convolutions take ([`etwgpu_kernels::ConvKernels`]:
    /// the implicit GEMM where it fills its tiles, the direct kernel
    /// everywhere, or the implicit GEMM everywhere it can run); `None` (the
    /// default) takes the runtime's ([`crate::device::RuntimeOptions::conv`]:
    /// `ETWGPU_CONV`, else `auto`).
    pub conv: Option<etwgpu_kernels::ConvKernels>,
    /// Let a decode step's attention over a short cache run inside the O
    /// projection's 4-bit GEMV (`q4_gemv_sdpa.wgsl`, one dispatch instead
    /// of the split partials and the merging GEMV) where the device allows
    /// its 11 storage buffers: `Some(true)` at every position, `Some(false)`
    /// never, `None` (the default; `ETWGPU_GEMV_ATTENTION=1` or `=0` set
    /// the others) while the live context is at most
    /// [`etwgpu_kernels::GEMV_ATTN_AUTO_KEYS`] keys. On the H200 it
    /// saves ~0.15 ms a SmolLM2 token at the first positions, but each of
    /// its workgroups walks every key itself (~56 ns a key a layer), so
    /// past ~100 keys the split route is faster (run aj). On an H100 (run
    /// aq) the SmolLM2 shape decodes 1,057 tokens/s with it at 16 keys
    /// (942 without), 1,026 at 32 (953), 981 at 65-80 keys (935), 916 at
    /// 97-112 (932) and 869 at 129-144 (916); with the kernel's per-head
    /// sums named (run as), 1,003 at 64 keys (912), 941 at 96 (915), 918
    /// at 112 (907) and 901 at 128 (903); with its key loads 16 bytes
    /// wide (run au), 930-942 at 96 (912-923), 909-918 at 128 (905-914)
    /// and 863-866 at 160 (905-907). The first step past the
    /// bound lowers and models the other route's chain (~11 ms on that
    /// shape); the method keeps the chain of each side, so later crossings
    /// swap between them (`etwgpu_llm`'s decode warm-up takes that first
    /// step at load).
    pub gemv_attention: Option<bool>,
    /// Trust the program: create the kernels whose host rules prove every
    /// index into their fixed-size arrays (workgroup memory, private
    /// arrays, vectors) in bounds from the validated shapes (families
    /// marked `// bounds: host-checked`) through wgpu's unchecked path,
    /// without naga's index clamps
    /// ([`crate::pipeline_cache::UNCHECKED`]); every other kernel as
    /// always. Unsafe in spirit: a hostile program must not read outside
    /// its buffers, and this leaves that to the host rules' checks and to
    /// the driver's robust buffer access, so use it only for programs you
    /// trust (`etwgpu run --trusted-shaders`). Native Vulkan only: ignored
    /// on other backends (where wgpu's unchecked path would drop the
    /// storage buffers' bounds checks too) and on the web (where the
    /// browser checks every shader); `LoadedMethod::trusted_shaders` tells
    /// whether it was taken. `Some(true)` on, `Some(false)` off, `None`
    /// (the default) off unless `ETWGPU_TRUSTED_SHADERS=1`
    /// ([`crate::pipeline_cache::TRUSTED_SHADERS_ENV`]).
    pub trusted_shaders: Option<bool>,
    /// Round the input row of one-row 4-bit GEMVs (decode's linears: the
    /// plain ones, the output head, the SwiGLU pair after its RMS norm) to
    /// int8 per 32-input block and take each weight word's dot in
    /// integers (`dot4I8Packed`): fewer instructions a weight byte than
    /// the float dequantization, which bounds the float GEMV at the head's
    /// size. It changes the numbers: x is rounded to 8 bits a block, as
    /// llama.cpp's `q8_1` activations; the tests bound the error at 1.5% of
    /// the output's largest magnitude against the float path, exact
    /// against a reference that rounds x the same way, and the real
    /// SmolLM2-135M 4-bit export keeps PyTorch eager's top-1 token at 179 of
    /// 192 teacher-forced positions with it, 192 without. Other linears and
    /// prompts keep float activations. `Some(true)` on, `Some(false)` off,
    /// `None` (the default) off unless `ETWGPU_INT8_ACTIVATIONS=1`
    /// ([`crate::INT8_ACTIVATIONS_ENV`]); `etwgpu run|bench|generate|chat
    /// --int8-activations`.
    pub int8_activations: Option<bool>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            fuse: true,
            kv_cache_f16: false,
            precision: None,
            record_threads: None,
            early_submit: None,
            split_bytes: None,
            subgroups: None,
            conv: None,
            gemv_attention: None,
            trusted_shaders: None,
            int8_activations: None,
        }
    }
}

/// What a load is doing, for [`LoadProgress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadStage {
    /// Uploading constants (weights): `done` and `total` count bytes.
    Weights,
    /// Compiling compute pipelines: `done` and `total` count pipelines.
    Pipelines,
}

/// How far a load has come within one stage of one delegate call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadProgress {
    /// The stage.
    pub stage: LoadStage,
    /// Work done so far in this stage.
    pub done: u64,
    /// All the work of this stage.
    pub total: u64,
}

/// Where the host's time went over a delegate call's runs (summed since
/// load or the last reset): how long per-call overheads are, measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunTimes {
    /// Runs counted.
    pub runs: u64,
    /// Checking and converting inputs.
    pub inputs: std::time::Duration,
    /// Re-lowering the chain at new shapes or SymInt values, and updating
    /// the plan.
    pub lowering: std::time::Duration,
    /// Lowerings of the whole chain: at load, and again only after a run
    /// failed part-way through re-lowering. A new position or new input
    /// shapes re-run only the host rules they reach (`op_lowerings`).
    pub chain_lowerings: u64,
    /// Host rules run (one per op and lowering): a decode step whose only
    /// change is the position runs those of the ops that read it.
    pub op_lowerings: u64,
    /// Times the bind groups were made anew for a changed structure (other
    /// shaders or bindings); otherwise a re-lowering patches uniforms and
    /// workgroup counts in place.
    pub plan_builds: u64,
    /// Uploading inputs and recording the dispatches (the command buffer
    /// finished, not yet submitted).
    pub recording: std::time::Duration,
    /// Command buffers submitted: one a run, or with the dispatches
    /// recorded on several threads ([`LoadOptions::record_threads`]) one
    /// for the inputs, one per thread and one for the read-backs.
    pub command_buffers: u64,
    /// `Queue::submit`: handing the commands to the driver (a software
    /// Vulkan such as lavapipe may run them right there).
    pub submitting: std::time::Duration,
    /// Waiting for the GPU to finish and the read-back to map.
    pub waiting: std::time::Duration,
    /// Copying and converting the outputs.
    pub reading: std::time::Duration,
}

impl std::ops::AddAssign for RunTimes {
    fn add_assign(&mut self, o: Self) {
        self.runs += o.runs;
        self.inputs += o.inputs;
        self.lowering += o.lowering;
        self.command_buffers += o.command_buffers;
        self.chain_lowerings += o.chain_lowerings;
        self.op_lowerings += o.op_lowerings;
        self.plan_builds += o.plan_builds;
        self.recording += o.recording;
        self.submitting += o.submitting;
        self.waiting += o.waiting;
        self.reading += o.reading;
    }
}

/// Host time between laps, for [`RunTimes`].
pub(crate) struct Stopwatch(web_time::Instant);

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Self(web_time::Instant::now())
    }

    /// Time since the start or the last lap.
    pub(crate) fn lap(&mut self) -> std::time::Duration {
        let now = web_time::Instant::now();
        let d = now - self.0;
        self.0 = now;
        d
    }
}

//! Every golden fixture of `test_data/fixtures/`, embedded in the test
//! binary (the browser has no file system): model, manifest and `.npy`
//! files. [`listed_files_match_the_directory`] fails, on native runs, when
//! this list and the directory disagree.

#![cfg_attr(
    not(target_arch = "wasm32"),
    expect(dead_code, reason = "the browser tests read the fixtures; native runs only check the list")
)]

/// One embedded fixture.
pub struct Fixture {
    /// Directory name.
    pub name: &'static str,
    /// `model.pte`.
    pub model: &'static [u8],
    /// `manifest.json`.
    pub manifest: &'static str,
    /// The `.npy` files, by name.
    pub files: &'static [(&'static str, &'static [u8])],
}

macro_rules! fixtures {
    ($($name:ident: [$($file:literal),* $(,)?],)*) => {
        /// Every fixture, sorted by name.
        pub const FIXTURES: &[Fixture] = &[$(Fixture {
            name: stringify!($name),
            model: include_bytes!(concat!("../../../../test_data/fixtures/", stringify!($name), "/model.pte")),
            manifest: include_str!(concat!("../../../../test_data/fixtures/", stringify!($name), "/manifest.json")),
            files: &[$(($file, include_bytes!(concat!("../../../../test_data/fixtures/", stringify!($name), "/", $file)))),*],
        }),*];
    };
}

fixtures! {
    bert_encoder: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call0.out1.npy"],
    binary: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.in4.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    casts: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    compare_logic: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.in4.npy", "call0.in5.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out13.npy", "call0.out14.npy", "call0.out15.npy", "call0.out16.npy", "call0.out17.npy", "call0.out18.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    conv_more: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out13.npy", "call0.out14.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    convnet: ["call0.in0.npy", "call0.out0.npy"],
    convnet_fp16: ["call0.in0.npy", "call0.out0.npy"],
    convnext: ["call0.in0.npy", "call0.out0.npy"],
    cpu_leftovers: ["call0.in0.npy", "call0.out0.npy", "call0.out1.npy"],
    creation_ops: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy"],
    dynamic_seq: ["call0.in0.npy", "call0.out0.npy", "call1.in0.npy", "call1.out0.npy", "call2.in0.npy", "call2.out0.npy"],
    dynamic_symint: ["call0.in0.npy", "call0.out0.npy", "call0.out1.npy", "call1.in0.npy", "call1.out0.npy", "call1.out1.npy", "call2.in0.npy", "call2.out0.npy", "call2.out1.npy"],
    et_vk_sdpa: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.in4.npy", "call0.in5.npy", "call0.out0.npy", "call0.out1.npy"],
    float_ops: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy"],
    fp16_mlp: ["call0.in0.npy", "call0.out0.npy"],
    gpt2_decoder: ["call0.in0.npy", "call0.out0.npy"],
    gpt2_decoder_i64: ["call0.in0.npy", "call0.out0.npy"],
    grid_priors: ["call0.in0.npy", "call0.out0.npy", "call0.out1.npy"],
    index_wrap: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy"],
    indexing: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.in4.npy", "call0.in5.npy", "call0.in6.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy"],
    int32_ops: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    int64_ops: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy"],
    kept_ops: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy"],
    llama_tiny_8da4w: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_8da4w_fp16: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_fp16: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_fp32: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_q4: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_q4_fp16: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy"],
    llama_tiny_static: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call1.in0.npy", "call1.in1.npy", "call1.out0.npy", "call2.in0.npy", "call2.in1.npy", "call2.out0.npy", "call3.in0.npy", "call3.in1.npy", "call3.out0.npy", "call4.in0.npy", "call4.in1.npy", "call4.out0.npy", "call5.in0.npy", "call5.in1.npy", "call5.out0.npy", "call6.in0.npy", "call6.in1.npy", "call6.out0.npy", "call7.in0.npy", "call7.in1.npy", "call7.out0.npy"],
    matmul: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.in4.npy", "call0.in5.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy"],
    mha_encoder: ["call0.in0.npy", "call0.out0.npy"],
    mlp: ["call0.in0.npy", "call0.out0.npy"],
    one_op: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy"],
    pad_cat_repeat: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy"],
    partial_delegate: ["call0.in0.npy", "call0.out0.npy"],
    q4_weight_only: ["call0.in0.npy", "call0.out0.npy"],
    q8_block: ["call0.in0.npy", "call0.out0.npy"],
    q8_conv_transpose: ["call0.in0.npy", "call0.out0.npy"],
    q8_convnet: ["call0.in0.npy", "call0.out0.npy"],
    q8_float_head: ["call0.in0.npy", "call0.out0.npy"],
    q8_gemv: ["call0.in0.npy", "call0.out0.npy"],
    q8_mlp: ["call0.in0.npy", "call0.out0.npy"],
    q8_pixel_shuffle: ["call0.in0.npy", "call0.out0.npy"],
    q8_relu_pool: ["call0.in0.npy", "call0.out0.npy"],
    q8_resnet_tiny: ["call0.in0.npy", "call0.out0.npy"],
    q8_weight_only: ["call0.in0.npy", "call0.out0.npy"],
    reductions: ["call0.in0.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    rope_hf: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call1.in0.npy", "call1.in1.npy", "call1.in2.npy", "call1.out0.npy", "call1.out1.npy", "call1.out2.npy", "call1.out3.npy", "call2.in0.npy", "call2.in1.npy", "call2.in2.npy", "call2.out0.npy", "call2.out1.npy", "call2.out2.npy", "call2.out3.npy"],
    rope_interleaved: ["call0.in0.npy", "call0.out0.npy"],
    shape_ops: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    shufflenet: ["call0.in0.npy", "call0.out0.npy"],
    swin_tiny: ["call0.in0.npy", "call0.out0.npy"],
    three_delegates: ["call0.in0.npy", "call0.out0.npy"],
    tiny_vit: ["call0.in0.npy", "call0.out0.npy"],
    to_copy: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy"],
    train_lora_grad: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.in3.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy", "call0.out3.npy"],
    transformer_block: ["call0.in0.npy", "call0.out0.npy"],
    uint8_image: ["call0.in0.npy", "call0.out0.npy", "call0.out1.npy", "call0.out2.npy"],
    unary: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy", "call0.out1.npy", "call0.out10.npy", "call0.out11.npy", "call0.out12.npy", "call0.out13.npy", "call0.out14.npy", "call0.out15.npy", "call0.out16.npy", "call0.out17.npy", "call0.out18.npy", "call0.out19.npy", "call0.out2.npy", "call0.out20.npy", "call0.out21.npy", "call0.out3.npy", "call0.out4.npy", "call0.out5.npy", "call0.out6.npy", "call0.out7.npy", "call0.out8.npy", "call0.out9.npy"],
    update_cache: ["call0.in0.npy", "call0.in1.npy", "call0.in2.npy", "call0.out0.npy", "call0.out1.npy", "call1.in0.npy", "call1.in1.npy", "call1.in2.npy", "call1.out0.npy", "call1.out1.npy", "call2.in0.npy", "call2.in1.npy", "call2.in2.npy", "call2.out0.npy", "call2.out1.npy"],
    whisper_encoder: ["call0.in0.npy", "call0.out0.npy"],
    worked_example: ["call0.in0.npy", "call0.in1.npy", "call0.out0.npy"],
}

/// The fixture called `name`.
pub fn fixture(name: &str) -> &'static Fixture {
    FIXTURES.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no embedded fixture {name}"))
}

impl Fixture {
    /// The embedded file `name`.
    pub fn file(&self, name: &str) -> &'static [u8] {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .unwrap_or_else(|| panic!("{}: no {name}", self.name))
    }
}

/// The embedded list matches `test_data/fixtures/` (native only: the
/// browser cannot list directories).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn listed_files_match_the_directory() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures");
    let mut on_disk = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("entry").path();
        if !path.join("manifest.json").exists() {
            continue;
        }
        let mut files: Vec<String> = std::fs::read_dir(&path)
            .expect("fixture directory")
            .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
            .filter(|n| n != "model.pte" && n != "manifest.json")
            .collect();
        files.sort();
        on_disk.push((path.file_name().expect("name").to_string_lossy().to_string(), files));
    }
    on_disk.sort();
    let listed: Vec<(String, Vec<String>)> =
        FIXTURES.iter().map(|f| (f.name.to_string(), f.files.iter().map(|(n, _)| n.to_string()).collect())).collect();
    assert_eq!(listed, on_disk, "update crates/web/tests/it/embedded.rs to list test_data/fixtures/");
}

//! The hostile-file corpus in `test_data/hostile/`: crafted `.pte` files
//! that are truncated, mislabelled, out of range or self-referential. Each
//! must give a typed error (or, for problems only a load can see, open
//! cleanly). The files are generated here; `ETWGPU_BLESS=1 cargo test -p
//! etwgpu-format --test it hostile` rewrites them, and the test fails when
//! the committed files drift from the generator.

use std::collections::BTreeMap;
use std::path::PathBuf;

use etwgpu_format::writer::{self, GraphBuilder, InstructionSpec, ProgramBuilder, RawTensor, RawValue};
use etwgpu_format::{DType, Program};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test_data/hostile")
}

fn pte(g: GraphBuilder) -> Vec<u8> {
    ProgramBuilder::single_delegate(g).to_bytes()
}

fn with_value(idx: usize, v: RawValue) -> Vec<u8> {
    let mut g = writer::worked_example();
    g.values[idx] = v;
    pte(g)
}

fn tensor(datatype: i8, dims: Vec<u32>, constant_id: i32) -> RawValue {
    RawValue::Tensor(RawTensor::new(datatype, dims, constant_id))
}

fn patch(mut b: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

/// Offset of the first delegate blob in a file made by `pte`.
fn blob_at(b: &[u8]) -> usize {
    b.windows(4).position(|w| w == b"VH00").expect("a VH00 blob") - 4
}

/// Every hostile case: file name (without `.pte`) -> bytes.
fn corpus() -> BTreeMap<String, Vec<u8>> {
    let good = pte(writer::worked_example());
    let blob = blob_at(&good);
    let mut c: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut add = |name: &str, bytes: Vec<u8>| {
        assert!(c.insert(name.to_string(), bytes).is_none(), "duplicate case {name}");
    };
    add("empty", Vec::new());
    add("seven_bytes", good[..7].to_vec());
    for cut in [16, 40, 100, 400, 1000, 1500, blob + 20, blob + 200, good.len() - 1] {
        add(&format!("truncated_at_{cut:05}"), good[..cut].to_vec());
    }
    add("identifier_et11", patch(good.clone(), 4, b"ET11"));
    add("identifier_zeroed", patch(good.clone(), 4, &[0; 4]));
    add("root_offset_past_end", patch(good.clone(), 0, &u32::MAX.to_le_bytes()));
    add("eh00_program_size_past_end", patch(good.clone(), 16, &(1u64 << 40).to_le_bytes()));
    add("eh00_program_size_too_small", patch(good.clone(), 16, &20u64.to_le_bytes()));
    add("eh00_segment_base_inside_program", patch(good.clone(), 24, &64u64.to_le_bytes()));
    add("eh00_segment_data_past_end", patch(good.clone(), 32, &(1u64 << 33).to_le_bytes()));
    add("eh00_segment_base_overflow", patch(patch(good.clone(), 24, &u64::MAX.to_le_bytes()), 32, &[0; 8]));
    add("vh00_magic_wrong", patch(good.clone(), blob + 4, b"VH01"));
    add("vh00_header_size_short", patch(good.clone(), blob + 8, &10u16.to_le_bytes()));
    add("vh00_flatbuffer_size_zero", patch(good.clone(), blob + 14, &0u32.to_le_bytes()));
    add("vh00_flatbuffer_past_blob", patch(good.clone(), blob + 14, &u32::MAX.to_le_bytes()));
    add("vh00_bytes_overlap_flatbuffer", patch(good.clone(), blob + 18, &40u32.to_le_bytes()));
    add("vh00_bytes_past_blob", patch(good.clone(), blob + 22, &(1u64 << 50).to_le_bytes()));
    add("vk00_identifier_wrong", patch(good.clone(), blob + 36, b"VK01"));
    add("vk00_root_offset_past_end", patch(good.clone(), blob + 32, &u32::MAX.to_le_bytes()));

    add("value_unknown_dtype", with_value(6, tensor(42, vec![2, 4], -1)));
    let mut staged = tensor(5, vec![2, 4], -1);
    if let RawValue::Tensor(t) = &mut staged {
        t.staging_datatype = 99;
    }
    add("value_unknown_staging_dtype", with_value(6, staged));
    add("value_dims_overflow_u64", with_value(6, tensor(5, vec![u32::MAX; 8], -1)));
    add("value_absurd_rank", with_value(6, tensor(5, vec![1; 100], -1)));
    add("value_constant_id_out_of_range", with_value(6, tensor(5, vec![2, 4], 1000)));
    add("value_constant_shorter_than_tensor", with_value(6, tensor(5, vec![3, 4], 1)));
    add("value_list_cycle", with_value(6, RawValue::ValueList(vec![6])));
    add("value_list_id_out_of_range", with_value(6, RawValue::ValueList(vec![1 << 20])));
    add("value_unknown_union_tag", with_value(6, RawValue::UnknownTag(200)));

    let mut g = writer::worked_example();
    g.chain[2].2[1] = 4096;
    add("op_arg_id_out_of_range", pte(g));
    let mut g = writer::worked_example();
    g.chain[2].2[0] = -3;
    add("op_arg_id_negative", pte(g));
    let mut g = writer::worked_example();
    g.output_ids.push(77);
    add("graph_output_id_out_of_range", pte(g));
    let mut g = writer::worked_example();
    g.chain[1].1 = "aten.frobnicate.default".into();
    add("op_unknown", pte(g));
    let mut g = writer::worked_example();
    g.chain[3].2[1] = 7; // linear's weight is an Int
    add("op_arg_wrong_kind", pte(g));
    let mut g = writer::worked_example();
    g.named_data.clear();
    add("constant_key_missing", pte(g));
    let mut g = writer::worked_example();
    g.constants[0] = writer::RawConstant::InBytes { offset: u64::MAX - 8, len: 48 };
    add("constant_range_overflow", pte(g));

    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    if let InstructionSpec::Delegate { args, .. } = &mut b.methods[0].instructions[0] {
        args.pop();
    }
    add("delegate_call_arity", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].instructions[0] = InstructionSpec::Delegate { delegate_index: 5, args: vec![0, 1, 2] };
    add("delegate_index_out_of_range", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].instructions.push(InstructionSpec::Kernel { op_index: 3, args: vec![0] });
    add("kernel_op_index_out_of_range", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].inputs.push(99);
    add("method_input_out_of_range", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].delegates[0].blob = b"definitely not a VH00 blob, just text".to_vec();
    add("delegate_blob_not_vh00", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].values[0] = writer::PlanValueSpec::Tensor {
        scalar_type: DType::F32.to_scalar_type(),
        sizes: vec![2, -4],
        dynamism: 0,
        data_buffer_idx: 0,
    };
    add("plan_tensor_negative_dim", b.to_bytes());
    let mut b = ProgramBuilder::single_delegate(writer::worked_example());
    b.methods[0].values[0] = writer::PlanValueSpec::Tensor {
        scalar_type: DType::F32.to_scalar_type(),
        sizes: vec![4],
        dynamism: 0,
        data_buffer_idx: 9,
    };
    add("plan_constant_index_out_of_range", b.to_bytes());

    let mut garbage = Vec::with_capacity(4096);
    let mut x = 0x1234_5678_9abc_def0u64;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        garbage.push(x as u8);
    }
    add("random_bytes", garbage.clone());
    add("random_bytes_with_et12", patch(garbage, 4, b"ET12"));
    c
}

fn describe(bytes: &[u8]) -> String {
    match Program::from_bytes(bytes.to_vec()) {
        Err(e) => format!("error: {e}"),
        Ok(p) => {
            let missing: usize = p
                .methods
                .iter()
                .flat_map(|m| m.vulkan_delegates())
                .map(|(_, _, g)| g.constants.iter().filter(|c| c.data().is_none()).count())
                .sum();
            format!(
                "opens ({} method(s), {missing} constant(s) unresolved): the problem surfaces at load",
                p.methods.len()
            )
        }
    }
}

#[test]
fn hostile_corpus_gives_typed_errors() {
    let corpus = corpus();
    assert!(corpus.len() >= 30, "only {} cases", corpus.len());
    let dir = dir();
    if std::env::var("ETWGPU_BLESS").as_deref() == Ok("1") {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test_data/hostile");
        for (name, bytes) in &corpus {
            std::fs::write(dir.join(format!("{name}.pte")), bytes).expect("write");
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("test_data/hostile exists (ETWGPU_BLESS=1 writes it)")
        .map(|e| e.expect("entry").file_name().to_string_lossy().trim_end_matches(".pte").to_string())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, corpus.keys().cloned().collect::<Vec<_>>(), "corpus drifted; rerun with ETWGPU_BLESS=1");
    let mut report = String::new();
    for (name, bytes) in &corpus {
        let file = std::fs::read(dir.join(format!("{name}.pte"))).expect("read");
        assert!(file == *bytes, "{name}.pte drifted from the generator; rerun with ETWGPU_BLESS=1");
        report.push_str(&format!("{name}: {}\n", describe(&file)));
    }
    insta::assert_snapshot!("hostile_corpus", report);
}

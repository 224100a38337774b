//! Unit tests of the reader and writer: round trips through the writer,
//! hostile variations, and mutation/truncation properties.

use proptest::prelude::*;

use crate::writer::{GraphBuilder, ProgramBuilder, RawTensor, RawValue, sha256_hex};
use crate::{ConstantSource, DType, Error, Instruction, PlanValue, Program, ShapeProblem, ValueId, VkValue};

fn worked_example() -> GraphBuilder {
    crate::writer::worked_example()
}

fn check<T>(r: crate::Result<T>) -> T {
    match r {
        Ok(x) => x,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn check_err<T: std::fmt::Debug>(r: crate::Result<T>) -> Error {
    match r {
        Ok(x) => panic!("expected an error, got {x:?}"),
        Err(e) => e,
    }
}

#[test]
fn worked_example_round_trips() {
    let bytes = ProgramBuilder::single_delegate(worked_example()).to_bytes();
    let program = check(Program::from_bytes(bytes));
    assert_eq!(program.methods.len(), 1);
    let m = &program.methods[0];
    assert_eq!(m.name, "forward");
    assert_eq!(m.inputs, vec![0, 1]);
    assert_eq!(m.outputs, vec![2]);
    assert_eq!(m.instructions, vec![Instruction::Delegate { delegate_index: 0, args: vec![0, 1, 2] }]);
    assert!(m.is_fully_delegated());
    let g = m.delegates[0].graph.as_ref().expect("a Vulkan graph");
    assert_eq!(g.chain.len(), 5);
    assert_eq!(g.chain[3].name, "aten.linear.default");
    assert_eq!(g.chain[3].args, vec![ValueId(8), ValueId(0), ValueId(1), ValueId(9)]);
    assert_eq!(g.input_ids, vec![ValueId(4), ValueId(5)]);
    assert_eq!(g.output_ids, vec![ValueId(10)]);
    assert_eq!(g.value(ValueId(7)), &VkValue::Int(1));
    let bias = g.tensor(ValueId(1)).expect("tensor");
    assert_eq!(bias.dims, vec![3]);
    let c = &g.constants[bias.constant.expect("constant").0 as usize];
    let data = c.data().expect("resolved");
    let floats: Vec<f32> =
        program.data(data).chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(floats, vec![-0.4777, -0.3311, -0.2061]);
    match &c.source {
        ConstantSource::Named { key, .. } => assert_eq!(key, &sha256_hex(program.data(data))),
        other => panic!("expected named data, got {other:?}"),
    }
    // Non-constant tensors carry no constant id and no memory object.
    let x = g.tensor(ValueId(5)).expect("tensor");
    assert_eq!((x.constant, x.mem_obj_id, x.staging_dtype), (None, None, None));
}

#[test]
fn every_value_kind_round_trips() {
    let mut g = GraphBuilder::new();
    let ids = [
        g.null(),
        g.int(-7),
        g.double(0.25),
        g.bool(true),
        g.int_list(&[1, -2, 3]),
        g.double_list(&[1.5]),
        g.bool_list(&[true, false]),
        g.string("mean"),
        g.sym_int(),
        g.tensor_staged(DType::I32, DType::I64, &[1, 16]),
    ];
    let list = g.value_list(&[ids[9], ids[8], ids[0]]);
    g.inputs(&[ids[9]]).outputs(&[ids[9]]);
    let program = check(Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()));
    let graph = program.methods[0].delegates[0].graph.as_ref().expect("graph");
    let kinds: Vec<&str> = graph.values.iter().map(VkValue::kind).collect();
    assert_eq!(
        kinds,
        [
            "Null",
            "Int",
            "Double",
            "Bool",
            "IntList",
            "DoubleList",
            "BoolList",
            "String",
            "SymInt",
            "Tensor",
            "ValueList"
        ]
    );
    assert_eq!(graph.values[1], VkValue::Int(-7));
    assert_eq!(graph.values[2], VkValue::Double(0.25));
    assert_eq!(graph.values[4], VkValue::IntList(vec![1, -2, 3]));
    assert_eq!(graph.values[6], VkValue::BoolList(vec![true, false]));
    assert_eq!(graph.values[7], VkValue::String("mean".into()));
    assert_eq!(graph.value(list), &VkValue::ValueList(vec![ids[9], ids[8], ids[0]]));
    let t = graph.tensor(ids[9]).expect("tensor");
    assert_eq!((t.dtype, t.io_dtype()), (DType::I32, DType::I64));
    // The plan-level tensor uses the staging dtype, as the exporter does.
    match &program.methods[0].values[0] {
        PlanValue::Tensor(pt) => assert_eq!(pt.scalar_type.name(), "int64"),
        other => panic!("expected a tensor, got {other:?}"),
    }
}

#[test]
fn identical_constants_share_one_named_blob_but_stay_separate_values() {
    let mut g = GraphBuilder::new();
    let zeros = vec![0u8; 64];
    let a = g.constant(DType::F32, &[16], &zeros);
    let b = g.constant(DType::F32, &[16], &zeros);
    g.inputs(&[]).outputs(&[a, b]);
    let program = check(Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()));
    assert_eq!(program.named_data.len(), 1);
    let graph = program.methods[0].delegates[0].graph.as_ref().expect("graph");
    assert_eq!(graph.constants.len(), 2);
    assert_eq!(graph.constants[0].data(), graph.constants[1].data());
    assert_ne!(graph.tensor(a).expect("t").constant, graph.tensor(b).expect("t").constant);
}

#[test]
fn owned_and_keyed_constants_match_borrowed_ones_and_into_bytes_matches_to_bytes() {
    let ones: Vec<u8> = (0..16).flat_map(|_| 1f32.to_le_bytes()).collect();
    let mut borrowed = GraphBuilder::new();
    let a = borrowed.constant(DType::F32, &[16], &ones);
    let b = borrowed.constant(DType::F32, &[16], &ones);
    let c = borrowed.constant(DType::F32, &[4], &[7; 16]);
    borrowed.inputs(&[]).outputs(&[a, b, c]);
    let mut owned = GraphBuilder::new();
    owned.constant_owned(DType::F32, &[16], ones.clone());
    owned.constant_keyed(DType::F32, &[16], sha256_hex(&ones), vec![0; 64]);
    owned.constant_owned(DType::F32, &[4], vec![7; 16]);
    owned.inputs(&[]).outputs(&[a, b, c]);
    assert_eq!(owned.values, borrowed.values);
    assert_eq!(owned.named_data, borrowed.named_data, "the second keyed constant's bytes are dropped");
    let mut p = ProgramBuilder::single_delegate(owned);
    p.add_delegate_method("other", worked_example(), false);
    let bytes = p.to_bytes();
    assert_eq!(p.into_bytes(), bytes);
    let program = check(Program::from_bytes(bytes));
    assert_eq!(program.named_data.len(), 2 + 3, "ones, sevens, and the worked example's three");
}

#[test]
fn constants_in_the_vh00_bytes_section_resolve() {
    let mut g = GraphBuilder::new();
    let first = g.constant_in_blob(DType::U8, &[3], &[1, 2, 3]);
    let second = g.constant_in_blob(DType::I32, &[2], &[5, 0, 0, 0, 6, 0, 0, 0]);
    g.outputs(&[first, second]);
    let program = check(Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()));
    let graph = program.methods[0].delegates[0].graph.as_ref().expect("graph");
    let bytes: Vec<&[u8]> = graph.constants.iter().map(|c| program.data(c.data().expect("resolved"))).collect();
    assert_eq!(bytes, vec![&[1u8, 2, 3][..], &[5, 0, 0, 0, 6, 0, 0, 0][..]]);
    assert!(matches!(graph.constants[0].source, ConstantSource::DelegateBytes(_)));
}

#[test]
fn inline_delegates_parse_like_segment_ones() {
    let mut b = ProgramBuilder::new();
    b.add_delegate_method("forward", worked_example(), true);
    let inline = check(Program::from_bytes(b.to_bytes()));
    let segment = check(Program::from_bytes(ProgramBuilder::single_delegate(worked_example()).to_bytes()));
    assert_eq!(inline.methods[0].delegates[0].location, crate::BlobLocation::Inline(0));
    assert_eq!(
        inline.methods[0].delegates[0].graph,
        segment.methods[0].delegates[0].graph.clone().map(|mut g| {
            // Constant ranges are file offsets and differ between the layouts.
            g.constants = inline.methods[0].delegates[0].graph.as_ref().expect("graph").constants.clone();
            g
        })
    );
}

#[test]
fn missing_named_data_is_reported_not_fatal() {
    let mut g = worked_example();
    g.named_data.clear();
    let program = check(Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()));
    let graph = program.methods[0].delegates[0].graph.as_ref().expect("graph");
    assert!(graph.constants.iter().all(|c| matches!(c.source, ConstantSource::Missing { .. })));
}

fn with_value(v: RawValue) -> Vec<u8> {
    let mut g = worked_example();
    g.values[6] = v;
    ProgramBuilder::single_delegate(g).to_bytes()
}

fn tensor_raw(datatype: i8, dims: Vec<u32>, constant_id: i32) -> RawValue {
    RawValue::Tensor(RawTensor::new(datatype, dims, constant_id))
}

#[test]
fn hostile_graphs_give_typed_errors() {
    let e = check_err(Program::from_bytes(with_value(tensor_raw(42, vec![2, 4], -1))));
    assert!(matches!(e.root_cause(), Error::UnknownDType { code: 42, .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(tensor_raw(5, vec![u32::MAX; 8], -1))));
    assert!(matches!(e.root_cause(), Error::BadShape { problem: ShapeProblem::Overflow, .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(tensor_raw(5, vec![1; 40], -1))));
    assert!(matches!(e.root_cause(), Error::BadShape { problem: ShapeProblem::RankTooLarge, .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(tensor_raw(5, vec![2, 4], 99))));
    assert!(matches!(e.root_cause(), Error::IndexOutOfRange { what: "constant id", index: 99, .. }), "{e}");

    // The bias constant holds 12 bytes; claim it is a [3, 4] f32 tensor.
    let e = check_err(Program::from_bytes(with_value(tensor_raw(5, vec![3, 4], 1))));
    assert!(matches!(e.root_cause(), Error::ConstantTooShort { constant_id: 1, needed: 48, found: 12, .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(RawValue::ValueList(vec![6]))));
    assert!(matches!(e.root_cause(), Error::ValueKind { found: "ValueList", .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(RawValue::ValueList(vec![1000]))));
    assert!(matches!(e.root_cause(), Error::IndexOutOfRange { index: 1000, .. }), "{e}");

    let e = check_err(Program::from_bytes(with_value(RawValue::UnknownTag(77))));
    assert!(e.to_string().contains("unknown union type tag 77"), "{e}");

    let mut g = worked_example();
    g.chain[1].2[0] = 500;
    let e = check_err(Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()));
    assert!(e.to_string().contains("operator call 1 (aten.mul.Tensor)"), "{e}");

    let mut g = worked_example();
    g.output_ids.push(1);
    let mut b = ProgramBuilder::single_delegate(g.clone());
    // Drop one argument of the call: 3 arguments for 4 graph I/O values.
    if let crate::writer::InstructionSpec::Delegate { args, .. } = &mut b.methods[0].instructions[0] {
        args.pop();
    }
    let e = check_err(Program::from_bytes(b.to_bytes()));
    assert!(matches!(e.root_cause(), Error::DelegateArity { expected: 4, found: 3, .. }), "{e}");
}

#[test]
fn wrong_identifiers_are_named() {
    let mut bytes = ProgramBuilder::single_delegate(worked_example()).to_bytes();
    bytes[4..8].copy_from_slice(b"ET11");
    let e = check_err(Program::from_bytes(bytes));
    assert_eq!(e.to_string(), ".pte program: expected identifier \"ET12\", found \"ET11\"");

    let mut g = worked_example();
    g.values.clear();
    let mut b = ProgramBuilder::single_delegate(worked_example());
    b.methods[0].delegates[0].blob[4..8].copy_from_slice(b"XH00");
    let e = check_err(Program::from_bytes(b.to_bytes()));
    assert!(matches!(e.root_cause(), Error::Identifier { expected: "VH00", .. }), "{e}");
    assert!(e.to_string().starts_with("method 0 (\"forward\"): delegate 0:"), "{e}");
}

#[test]
fn vh00_rules_are_enforced() {
    let blob = worked_example().blob();
    let mut bad = blob.clone();
    bad[14..18].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(crate::vulkan::VhHeader::parse(&bad), Err(Error::Header { field: "flatbuffer_size", .. })));
    let mut bad = blob.clone();
    bad[18..22].copy_from_slice(&40u32.to_le_bytes());
    assert!(matches!(crate::vulkan::VhHeader::parse(&bad), Err(Error::Header { field: "bytes_offset", .. })));
    let mut bad = blob.clone();
    bad[8..10].copy_from_slice(&10u16.to_le_bytes());
    assert!(matches!(crate::vulkan::VhHeader::parse(&bad), Err(Error::Header { field: "header_size", .. })));
    let mut bad = blob;
    bad[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(crate::vulkan::VhHeader::parse(&bad), Err(Error::RangeOutOfBounds { .. })));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = ProgramBuilder::single_delegate(worked_example()).to_bytes();
    check(Program::from_bytes(bytes.clone()));
    for len in 0..bytes.len() {
        let cut = bytes[..len].to_vec();
        assert!(Program::from_bytes(cut).is_err(), "truncation to {len} of {} bytes parsed", bytes.len());
    }
}

/// A hand-made VK00 whose value table holds `n` references to one value
/// table, itself a string of `len` bytes.
fn shared_string_graph(n: u32, len: u32) -> Vec<u8> {
    let mut b = Vec::new();
    let le32 = |b: &mut Vec<u8>, x: u32| b.extend_from_slice(&x.to_le_bytes());
    le32(&mut b, 20); // root table at 20
    b.extend_from_slice(b"VK00");
    // Root vtable at 8: 3 slots, only slot 2 (values) set, at +4.
    for x in [10u16, 8, 0, 0, 4, 0] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    le32(&mut b, 12); // root table at 20: soffset to vtable at 8
    le32(&mut b, 4); // values: uoffset from 24 to the vector at 28
    le32(&mut b, n); // the vector at 28
    let table_vt = 32 + 4 * n as usize;
    let table = table_vt + 8;
    for i in 0..n as usize {
        le32(&mut b, (table - (32 + 4 * i)) as u32);
    }
    // VkValue vtable: 2 slots; tag at +8, value offset at +4.
    for x in [8u16, 12, 8, 4] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    le32(&mut b, 8); // VkValue table: soffset to its vtable
    le32(&mut b, 8); // value: uoffset to the String table at table + 12
    b.extend_from_slice(&[10, 0, 0, 0]); // tag STRING
    let string_table = table + 12;
    b.extend_from_slice(&(-8i32).to_le_bytes()); // vtable after the table
    le32(&mut b, 12); // string_val: uoffset to the bytes at string_table + 16
    for x in [6u16, 8, 4, 0] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(b.len(), string_table + 16);
    le32(&mut b, len);
    b.extend(std::iter::repeat_n(b'x', len as usize));
    b.push(0);
    b
}

#[test]
fn shared_references_cannot_blow_up_memory() {
    // Few references parse fine and really do share the string.
    let small = crate::writer::vh00_blob(&shared_string_graph(3, 1000), &[]);
    let graph = check(crate::VkGraph::parse(&small, 0, &|_| None));
    assert_eq!(graph.values.len(), 3);
    assert_eq!(graph.values[2], VkValue::String("x".repeat(1000)));
    // 20k references to a 64 KiB string would copy 1.3 GB: refused.
    let bomb = crate::writer::vh00_blob(&shared_string_graph(20_000, 1 << 16), &[]);
    let e = check_err(crate::VkGraph::parse(&bomb, 0, &|_| None));
    assert!(e.to_string().contains("would copy more than"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_files_never_panic(edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut bytes = ProgramBuilder::single_delegate(worked_example()).to_bytes();
        for (at, b) in edits {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        let _ = Program::from_bytes(bytes);
    }

    #[test]
    fn mutated_blobs_never_panic(edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut blob = worked_example().blob();
        for (at, b) in edits {
            let n = blob.len();
            blob[at % n] = b;
        }
        let _ = crate::VkGraph::parse(&blob, 0, &|_| None);
    }
}

#[test]
fn external_data_supplies_missing_constants() {
    let mut g = worked_example();
    let moved = std::mem::take(&mut g.named_data);
    let pte = ProgramBuilder::single_delegate(g).to_bytes();
    let ptd = crate::writer::ptd_bytes(&moved);
    let external = check(crate::ExternalData::from_bytes(std::sync::Arc::new(ptd)));
    assert_eq!(external.keys().count(), 3);
    let program = check(Program::from_shared(std::sync::Arc::new(pte), vec![external]));
    let graph = program.methods[0].delegates[0].graph.as_ref().expect("graph");
    for (c, (key, bytes)) in graph.constants.iter().zip(&moved) {
        let data = c.data().expect("resolved from the .ptd");
        assert_eq!(data.file, crate::DataFile::External(0));
        assert_eq!(program.data(data), &bytes[..], "{key}");
    }
}

#[test]
fn truncated_or_relabelled_ptd_is_an_error() {
    let ptd = crate::writer::ptd_bytes(&[("k".into(), vec![1, 2, 3])]);
    for len in 0..ptd.len() {
        let r = crate::ExternalData::from_bytes(std::sync::Arc::new(ptd[..len].to_vec()));
        assert!(r.is_err(), "truncation to {len} parsed");
    }
    let mut bad = ptd.clone();
    bad[4..8].copy_from_slice(b"FT02");
    let e = check_err(crate::ExternalData::from_bytes(std::sync::Arc::new(bad)));
    assert!(matches!(e, Error::Identifier { expected: "FT01", .. }), "{e}");
}

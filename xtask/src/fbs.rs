//! A parser for the subset of the FlatBuffers schema language our schemas
//! use, and the emitter that turns a schema into the field descriptors of
//! `etwgpu-format` (`crates/format/src/generated/*.rs`).
//!
//! Supported: `include`, `namespace`, `file_identifier`, `file_extension`,
//! `root_type`, `attribute`, `enum Name : type { A = n, B, }`,
//! `union Name { A, B }` and `table Name { field: type (= default)? (attrs)?; }`
//! with scalar, enum, string, table, union and vector-of-those types.
//! Anything else is an error, so a schema edit the generator does not
//! understand fails loudly instead of producing wrong code.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A parsed schema file.
#[derive(Debug, Default)]
pub struct Schema {
    pub namespace: String,
    pub includes: Vec<String>,
    pub file_identifier: Option<String>,
    pub root_type: Option<String>,
    pub items: Vec<Item>,
}

#[derive(Debug)]
pub enum Item {
    Enum { name: String, repr: String, values: Vec<(String, i64)> },
    Union { name: String, members: Vec<String> },
    Table { name: String, fields: Vec<Field> },
}

#[derive(Debug)]
pub struct Field {
    pub name: String,
    pub ty: Ty,
    pub default: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Ty {
    Named(String),
    Vector(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(String),
    Punct(char),
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '"' {
            let start = i + 1;
            i = start;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            if i == chars.len() {
                return Err("unterminated string".into());
            }
            out.push(Tok::Str(chars[start..i].iter().collect()));
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || c == '-' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            out.push(Tok::Num(chars[start..i].iter().collect()));
        } else if "{}[]():;=,".contains(c) {
            out.push(Tok::Punct(c));
            i += 1;
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn next(&mut self) -> Result<Tok, String> {
        let t = self.toks.get(self.pos).cloned().ok_or("unexpected end of schema")?;
        self.pos += 1;
        Ok(t)
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn ident(&mut self) -> Result<String, String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => Err(format!("expected a name, found {t:?}")),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        match self.next()? {
            Tok::Str(s) => Ok(s),
            t => Err(format!("expected a string, found {t:?}")),
        }
    }
    fn punct(&mut self, c: char) -> Result<(), String> {
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => Err(format!("expected {c:?}, found {t:?}")),
        }
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Result<String, String> {
        match self.next()? {
            Tok::Ident(s) | Tok::Num(s) | Tok::Str(s) => Ok(s),
            t => Err(format!("expected a value, found {t:?}")),
        }
    }
    fn skip_attributes(&mut self) -> Result<(), String> {
        if self.eat('(') {
            while !self.eat(')') {
                self.next()?;
            }
        }
        Ok(())
    }
}

/// Parses one schema file's text.
pub fn parse(src: &str) -> Result<Schema, String> {
    let mut p = Parser { toks: lex(src)?, pos: 0 };
    let mut schema = Schema::default();
    while p.peek().is_some() {
        let kw = p.ident()?;
        match kw.as_str() {
            "include" => {
                schema.includes.push(p.string()?);
                p.punct(';')?;
            }
            "namespace" => {
                schema.namespace = p.ident()?;
                p.punct(';')?;
            }
            "file_identifier" => {
                schema.file_identifier = Some(p.string()?);
                p.punct(';')?;
            }
            "file_extension" | "attribute" => {
                p.string()?;
                p.punct(';')?;
            }
            "root_type" => {
                schema.root_type = Some(p.ident()?);
                p.punct(';')?;
            }
            "enum" => {
                let name = p.ident()?;
                p.punct(':')?;
                let repr = p.ident()?;
                p.skip_attributes()?;
                p.punct('{')?;
                let mut values = Vec::new();
                let mut next = 0i64;
                while !p.eat('}') {
                    let v = p.ident()?;
                    if p.eat('=') {
                        let n = p.value()?;
                        next = n.parse().map_err(|_| format!("enum {name}: bad value {n}"))?;
                    }
                    values.push((v, next));
                    next += 1;
                    p.eat(',');
                }
                schema.items.push(Item::Enum { name, repr, values });
            }
            "union" => {
                let name = p.ident()?;
                p.punct('{')?;
                let mut members = Vec::new();
                while !p.eat('}') {
                    members.push(p.ident()?);
                    p.eat(',');
                }
                schema.items.push(Item::Union { name, members });
            }
            "table" => {
                let name = p.ident()?;
                p.skip_attributes()?;
                p.punct('{')?;
                let mut fields = Vec::new();
                while !p.eat('}') {
                    let fname = p.ident()?;
                    p.punct(':')?;
                    let ty = if p.eat('[') {
                        let inner = p.ident()?;
                        p.punct(']')?;
                        Ty::Vector(inner)
                    } else {
                        Ty::Named(p.ident()?)
                    };
                    let default = if p.eat('=') { Some(p.value()?) } else { None };
                    p.skip_attributes()?;
                    p.punct(';')?;
                    fields.push(Field { name: fname, ty, default });
                }
                schema.items.push(Item::Table { name, fields });
            }
            other => return Err(format!("unsupported schema keyword `{other}`")),
        }
    }
    Ok(schema)
}

fn scalar_rust(ty: &str) -> Option<&'static str> {
    Some(match ty {
        "bool" => "bool",
        "byte" | "int8" => "i8",
        "ubyte" | "uint8" => "u8",
        "short" | "int16" => "i16",
        "ushort" | "uint16" => "u16",
        "int" | "int32" => "i32",
        "uint" | "uint32" => "u32",
        "long" | "int64" => "i64",
        "ulong" | "uint64" => "u64",
        "float" | "float32" => "f32",
        "double" | "float64" => "f64",
        _ => return None,
    })
}

fn snake(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_ascii_uppercase())) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// What a type name refers to, across a schema and its includes.
enum Kind {
    Enum { repr: &'static str, values: Vec<(String, i64)> },
    Union,
    Table,
}

fn kinds(schemas: &[&Schema]) -> Result<BTreeMap<String, Kind>, String> {
    let mut map = BTreeMap::new();
    for s in schemas {
        for item in &s.items {
            let (name, kind) = match item {
                Item::Enum { name, repr, values } => {
                    let repr = scalar_rust(repr).ok_or_else(|| format!("enum {name}: bad type {repr}"))?;
                    (name, Kind::Enum { repr, values: values.clone() })
                }
                Item::Union { name, .. } => (name, Kind::Union),
                Item::Table { name, .. } => (name, Kind::Table),
            };
            map.insert(name.clone(), kind);
        }
    }
    Ok(map)
}

/// Emits the Rust field descriptors for `schema` (file `file_name`), with
/// `includes` supplying types defined in included files.
pub fn emit(file_name: &str, schema: &Schema, includes: &[&Schema]) -> Result<String, String> {
    let mut all: Vec<&Schema> = includes.to_vec();
    all.push(schema);
    let kinds = kinds(&all)?;
    let mut o = String::new();
    writeln!(o, "//! Field descriptors for `{file_name}` (namespace `{}`).", schema.namespace).unwrap();
    writeln!(o, "//!").unwrap();
    writeln!(o, "//! Generated by `cargo xtask codegen` from `crates/format/schema/{file_name}`.").unwrap();
    writeln!(o, "//! Do not edit: change the schema and regenerate.").unwrap();
    writeln!(o).unwrap();
    writeln!(o, "#![allow(clippy::module_inception, reason = \"a schema may name a type after its file\")]").unwrap();
    writeln!(o).unwrap();
    let has_tables = schema.items.iter().any(|i| matches!(i, Item::Table { .. }));
    if has_tables {
        writeln!(o, "#[allow(unused_imports, reason = \"not every schema uses every descriptor kind\")]").unwrap();
        writeln!(o, "use crate::fb::{{Offset, Scalar, Str, Tbl, Union}};").unwrap();
        writeln!(o, "#[allow(unused_imports, reason = \"not every schema has offset fields\")]").unwrap();
        writeln!(o, "use std::marker::PhantomData;").unwrap();
        writeln!(o).unwrap();
    }
    if let Some(id) = &schema.file_identifier {
        writeln!(o, "/// The file identifier at bytes 4..8.").unwrap();
        writeln!(o, "pub const FILE_IDENTIFIER: &[u8; 4] = b\"{id}\";").unwrap();
        writeln!(o).unwrap();
    }
    for item in &schema.items {
        match item {
            Item::Enum { name, .. } => {
                let Some(Kind::Enum { repr, values }) = kinds.get(name) else { unreachable!() };
                writeln!(o, "/// Enum `{name}` (stored as `{repr}`).").unwrap();
                writeln!(o, "pub mod {} {{", snake(name)).unwrap();
                for (v, n) in values {
                    writeln!(o, "    /// `{name}.{v}`.").unwrap();
                    writeln!(o, "    pub const {v}: {repr} = {n};").unwrap();
                }
                writeln!(o, "    /// The schema name of a value, if it has one.").unwrap();
                writeln!(o, "    pub fn name(value: {repr}) -> Option<&'static str> {{").unwrap();
                writeln!(o, "        match value {{").unwrap();
                for (v, n) in values {
                    writeln!(o, "            {n} => Some(\"{v}\"),").unwrap();
                }
                writeln!(o, "            _ => None,").unwrap();
                writeln!(o, "        }}").unwrap();
                writeln!(o, "    }}").unwrap();
                writeln!(o, "}}").unwrap();
                writeln!(o).unwrap();
            }
            Item::Union { name, members } => {
                writeln!(o, "/// Union `{name}`: the type tag of each member (0 is NONE).").unwrap();
                writeln!(o, "pub mod {} {{", snake(name)).unwrap();
                for (i, m) in members.iter().enumerate() {
                    writeln!(o, "    /// The tag of member `{m}`.").unwrap();
                    writeln!(o, "    pub const {}: u8 = {};", snake(m).to_uppercase(), i + 1).unwrap();
                }
                writeln!(o, "    /// The schema name of a tag, if it has one.").unwrap();
                writeln!(o, "    pub fn name(tag: u8) -> Option<&'static str> {{").unwrap();
                writeln!(o, "        match tag {{").unwrap();
                for (i, m) in members.iter().enumerate() {
                    writeln!(o, "            {} => Some(\"{m}\"),", i + 1).unwrap();
                }
                writeln!(o, "            _ => None,").unwrap();
                writeln!(o, "        }}").unwrap();
                writeln!(o, "    }}").unwrap();
                writeln!(o, "}}").unwrap();
                writeln!(o).unwrap();
            }
            Item::Table { name, fields } => {
                writeln!(o, "/// Table `{name}`.").unwrap();
                writeln!(o, "pub mod {} {{", snake(name)).unwrap();
                if !fields.is_empty() {
                    writeln!(o, "    use super::*;").unwrap();
                }
                let mut slot = 0u16;
                for f in fields {
                    let full = format!("{name}.{}", f.name);
                    let cname = f.name.to_uppercase();
                    let line = match &f.ty {
                        Ty::Named(t) => match (scalar_rust(t), kinds.get(t)) {
                            (Some(r), _) => {
                                let d = scalar_default(r, f.default.as_deref(), None)?;
                                format!(
                                    "pub const {cname}: Scalar<{r}> = Scalar {{ slot: {slot}, name: \"{full}\", default: {d} }};"
                                )
                            }
                            (None, Some(Kind::Enum { repr, values })) => {
                                let d = scalar_default(repr, f.default.as_deref(), Some(values))?;
                                format!(
                                    "pub const {cname}: Scalar<{repr}> = Scalar {{ slot: {slot}, name: \"{full}\", default: {d} }};"
                                )
                            }
                            (None, Some(Kind::Table)) => format!(
                                "pub const {cname}: Offset<Tbl> = Offset {{ slot: {slot}, name: \"{full}\", kind: PhantomData }};"
                            ),
                            (None, Some(Kind::Union)) => {
                                let line =
                                    format!("pub const {cname}: Union = Union {{ slot: {slot}, name: \"{full}\" }};");
                                slot += 1;
                                line
                            }
                            (None, None) if t == "string" => format!(
                                "pub const {cname}: Offset<Str> = Offset {{ slot: {slot}, name: \"{full}\", kind: PhantomData }};"
                            ),
                            (None, None) => return Err(format!("{full}: unknown type {t}")),
                        },
                        Ty::Vector(t) => {
                            let elem = match (scalar_rust(t), kinds.get(t)) {
                                (Some(r), _) => r.to_string(),
                                (None, Some(Kind::Enum { repr, .. })) => repr.to_string(),
                                (None, Some(Kind::Table)) => "Tbl".to_string(),
                                _ => return Err(format!("{full}: unsupported vector of {t}")),
                            };
                            format!(
                                "pub const {cname}: Offset<[{elem}]> = Offset {{ slot: {slot}, name: \"{full}\", kind: PhantomData }};"
                            )
                        }
                    };
                    let ty = match &f.ty {
                        Ty::Named(t) => t.clone(),
                        Ty::Vector(t) => format!("[{t}]"),
                    };
                    writeln!(o, "    /// Field `{full}`: `{ty}`.").unwrap();
                    writeln!(o, "    {line}").unwrap();
                    slot += 1;
                }
                writeln!(o, "}}").unwrap();
                writeln!(o).unwrap();
            }
        }
    }
    Ok(o.trim_end().to_string() + "\n")
}

fn scalar_default(repr: &str, default: Option<&str>, values: Option<&Vec<(String, i64)>>) -> Result<String, String> {
    let Some(d) = default else {
        return Ok(if repr == "bool" {
            "false".into()
        } else if repr.starts_with('f') {
            "0.0".into()
        } else {
            "0".into()
        });
    };
    if let Some(values) = values
        && let Some((_, n)) = values.iter().find(|(v, _)| v == d)
    {
        return Ok(n.to_string());
    }
    match repr {
        "bool" => match d {
            "true" | "false" => Ok(d.to_string()),
            _ => Err(format!("bad bool default {d}")),
        },
        _ => d.parse::<f64>().map(|_| d.to_string()).map_err(|_| format!("bad default {d}")),
    }
}

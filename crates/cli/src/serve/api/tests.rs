//! Unit tests of `api`: request checks and stop strings.

use super::*;

#[test]
fn stop_strings_cut_and_hold_back() {
    let stops = vec!["\n\n".to_string(), "END".to_string()];
    assert_eq!(cut("hello", &stops), Cut::Safe(5));
    assert_eq!(cut("hello\n", &stops), Cut::Safe(5));
    assert_eq!(cut("helloEN", &stops), Cut::Safe(5));
    assert_eq!(cut("hello\n\nmore", &stops), Cut::Stop(5));
    assert_eq!(cut("aENDb\n\n", &stops), Cut::Stop(1));
    assert_eq!(cut("x", &[]), Cut::Safe(1));
}

#[test]
fn requests_are_type_checked() {
    let r =
        parse(br#"{"prompt":[1,2,3],"max_tokens":4,"stop":"x","stream":true,"extra":{"a":1}}"#, false).expect("valid");
    assert_eq!(r.prompt, Prompt::Tokens(vec![1, 2, 3]));
    assert_eq!((r.max_tokens, r.stream, r.stop.as_slice()), (Some(4), true, &["x".to_string()][..]));
    let bad = |body: &str, chat: bool| parse(body.as_bytes(), chat).expect_err(body);
    assert_eq!(bad("{", false).param, None);
    assert_eq!(bad(r#"{"prompt":"a","max_tokens":"9"}"#, false).param, Some("max_tokens"));
    assert_eq!(bad(r#"{"prompt":"a","temperature":"hot"}"#, false).param, Some("temperature"));
    assert_eq!(bad(r#"{"prompt":"a","stream":1}"#, false).param, Some("stream"));
    assert_eq!(bad(r#"{"prompt":7}"#, false).param, Some("prompt"));
    assert_eq!(bad(r#"{"messages":"hi"}"#, true).param, Some("messages"));
    assert_eq!(bad(r#"{"messages":[{"role":"user","content":5}]}"#, true).param, Some("messages"));
    let chat = parse(br#"{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}"#, true);
    assert_eq!(chat.expect("valid").prompt, Prompt::Chat(vec![ChatMessage::new("user", "Hi")]));
}

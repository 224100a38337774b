"""``etwgpu serve`` against the ``openai`` Python client.

A debug ``etwgpu`` binary serves the tiny Llama fixture
(``test_data/fixtures/llama_tiny_fp32``: vocab 128, context 32) on
127.0.0.1 with a byte tokenizer (token id ``b`` is byte ``b``, ids 1 and 2
are ChatML's ``<|im_start|>`` and ``<|im_end|>``: the same tokenizer as
``byte_tokenizer(true)`` in ``crates/cli/tests/it/main.rs``). The client is
``openai.OpenAI`` with ``max_retries=0``, so an error status the server sends
is the exception the test sees.

What is checked: completions (text and token-id prompts, streamed and not)
give the three greedy tokens recorded from PyTorch eager; a chat turn gives
what ``etwgpu generate --chat`` gives, streamed and not; ``models.list()``;
the ``usage`` counts; ``stop`` strings; a ``seed`` repeating its sampled
text; ``BadRequestError`` for ``max_tokens`` over the server's limit or the
context and for a prompt past the context, ``AuthenticationError`` for a
wrong key; 16 concurrent clients each get the answer their prompt gets
alone; SIGTERM ends the server with status 0.

The binary is ``$ETWGPU_BIN``, else ``target/debug/etwgpu`` (built with
``cargo build -p etwgpu-cli`` when missing). Without a GPU adapter the
tests skip, unless ``GPU_TESTS=require``, when they fail.
"""

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import openai
import pytest

ROOT = Path(__file__).resolve().parents[4]
FIXTURE = ROOT / "test_data" / "fixtures" / "llama_tiny_fp32"
MODEL = FIXTURE / "model.pte"
KEY = "sekret"


def binary():
    """The ``etwgpu`` binary to test, built when it is missing."""
    if os.environ.get("ETWGPU_BIN"):
        return Path(os.environ["ETWGPU_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    exe = target / "debug" / "etwgpu"
    if not exe.exists():
        subprocess.run(["cargo", "build", "-p", "etwgpu-cli", "--bin", "etwgpu"], cwd=ROOT, check=True)
    return exe


def byte_tokenizer():
    """A HuggingFace ``tokenizer.json``: GPT-2's byte-level alphabet for
    bytes 0..127 with no merges, so id ``b`` is byte ``b``; ids 1 and 2 are
    the ChatML special tokens."""
    vocab, added, n = {}, [], 0
    for b in range(128):
        if 33 <= b <= 126:
            c = chr(b)
        else:
            n += 1
            c = chr(255 + n)
        special = {1: "<|im_start|>", 2: "<|im_end|>"}.get(b)
        if special:
            added.append(
                {
                    "id": b,
                    "content": special,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                    "special": True,
                }
            )
        vocab[special or c] = b
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "added_tokens": added,
        "pre_tokenizer": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }


def text_of(ids):
    """The text of byte-tokenizer ids."""
    return bytes(ids).decode()


def ids_of(name):
    return [int(t) for t in np.load(FIXTURE / name).reshape(-1)]


# The fixture's prompt and the eager argmax tokens its decode calls feed.
PROMPT = ids_of("call0.in0.npy")
GREEDY = [ids_of(f"call{i}.in0.npy")[0] for i in (1, 2, 3)]


class Server:
    """``etwgpu serve`` on a port of its choosing (``--port 0``, read from
    its listening line), up once ``/health`` answers."""

    def __init__(self, tokenizer, *extra):
        self.proc = subprocess.Popen(
            [str(binary()), "serve", "--model", str(MODEL), "--tokenizer", str(tokenizer)]
            + ["--host", "127.0.0.1", "--port", "0", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", tempfile.gettempdir())},
        )
        self.log = []
        lines = queue.Queue()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + 60
        self.port = None
        while self.port is None:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                pytest.fail("etwgpu serve printed no address within 60 s: " + "".join(self.log))
            if line is None:
                self.proc.wait()
                log = "".join(self.log)
                if "adapter" in log.lower() and os.environ.get("GPU_TESTS") != "require":
                    pytest.skip(f"no GPU adapter: {log.strip()}; set GPU_TESTS=require to fail instead")
                pytest.fail(f"etwgpu serve exited with {self.proc.returncode}: {log}")
            if line.startswith("etwgpu serve: ") and "http://127.0.0.1:" in line:
                self.port = int(line.rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    assert json.load(r)["status"] == "ok"
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def client(self, key=KEY):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=60)

    def stop(self):
        """SIGTERM, then the exit status (killed after 15 s)."""
        self.proc.terminate()
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(json.dumps(byte_tokenizer()))
    return path


@pytest.fixture(scope="module")
def server(tokenizer):
    s = Server(tokenizer, "--api-key", KEY, "--max-tokens", "20")
    yield s
    assert s.stop() == 0, "SIGTERM should end the server cleanly: " + "".join(s.log)


@pytest.fixture(scope="module")
def client(server):
    with server.client() as c:
        yield c


def test_completions_give_the_recorded_greedy_tokens(client):
    for prompt in (PROMPT, text_of(PROMPT)):
        r = client.completions.create(model="model", prompt=prompt, max_tokens=3)
        assert r.object == "text_completion"
        assert r.choices[0].text == text_of(GREEDY), f"prompt {prompt!r}"
        assert r.choices[0].finish_reason == "length"
        assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (5, 3, 8)
        assert r.id.startswith("cmpl-") and r.model == "model"


def test_streamed_completion_deltas_join_to_the_recorded_tokens(client):
    chunks = list(
        client.completions.create(
            model="model", prompt=PROMPT, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == text_of(GREEDY)
    assert len([c for c in chunks if c.choices and c.choices[0].text]) >= 2, "text arrives in pieces"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert not chunks[-1].choices and chunks[-1].usage.completion_tokens == 3
    assert chunks[-1].usage.prompt_tokens == 5


def generate_chat(tokenizer, text, max_tokens):
    """What ``etwgpu generate --chat`` replies to one user message."""
    out = subprocess.run(
        [str(binary()), "generate", "--model", str(MODEL), "--tokenizer", str(tokenizer)]
        + ["--prompt", text, "--chat", "--max-tokens", str(max_tokens)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    reply, stats = out.split("\nprompt: ", 1)
    return reply


def test_chat_matches_generate_chat(client, tokenizer):
    expected = generate_chat(tokenizer, "Hi", 8)
    messages = [{"role": "user", "content": "Hi"}]
    r = client.chat.completions.create(model="model", messages=messages, max_tokens=8)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == expected
    # "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert r.usage.prompt_tokens == 21
    assert r.usage.total_tokens == 21 + r.usage.completion_tokens
    assert 1 <= r.usage.completion_tokens <= 8
    stream = client.chat.completions.create(model="model", messages=messages, max_tokens=8, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason


def test_stop_and_seeded_sampling(client):
    # The greedy text is "d\x7f\\": a stop string at its second character
    # leaves the first, streamed or not.
    r = client.completions.create(model="model", prompt=PROMPT, max_tokens=3, stop=["\x7f"])
    assert (r.choices[0].text, r.choices[0].finish_reason) == ("d", "stop")
    chunks = list(client.completions.create(model="model", prompt=PROMPT, max_tokens=3, stop="\x7f", stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "d" and chunks[-1].choices[0].finish_reason == "stop"
    sample = dict(model="model", prompt=PROMPT, max_tokens=8, temperature=1.0, top_p=0.95)
    by_seed = [client.completions.create(**sample, seed=s).choices[0].text for s in range(4)]
    assert by_seed[2] == client.completions.create(**sample, seed=2).choices[0].text, "a seed repeats its text"
    assert len(set(by_seed)) >= 2, f"different seeds should sample differently: {by_seed}"


def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["model"]
    assert models.data[0].owned_by == "etwgpu"


def test_bad_requests_raise_the_openai_exceptions(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="model", prompt="Hello", max_tokens=30)
    assert e.value.status_code == 400 and e.value.param == "max_tokens"
    assert "over this server's limit of 20" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="model", prompt="Hello there, friend", max_tokens=19)
    assert e.value.param == "max_tokens" and e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="model", messages=[{"role": "user", "content": "x" * 40}])
    assert e.value.param == "messages" and e.value.code == "context_length_exceeded"
    assert "context is 32 tokens" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="model", prompt=[1, 2, 999])
    assert "outside the vocabulary" in e.value.body["message"]
    with server.client(key="wrong") as bad:
        with pytest.raises(openai.AuthenticationError) as e:
            bad.completions.create(model="model", prompt=PROMPT, max_tokens=3)
        assert e.value.status_code == 401
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    # Still serving.
    assert client.completions.create(model="model", prompt=PROMPT, max_tokens=3).choices[0].text == text_of(GREEDY)


def test_concurrent_clients_each_get_their_own_answer(server, client):
    prompts = [[3 + i * 7] + PROMPT[1:] for i in range(16)]

    def complete(c, prompt, stream):
        r = c.completions.create(model="model", prompt=prompt, max_tokens=6, stream=stream)
        return "".join(x.choices[0].text for x in r) if stream else r.choices[0].text

    alone = [complete(client, p, False) for p in prompts]
    assert len(set(alone)) >= 4, f"the prompts should give different answers: {alone}"

    def own_client(i):
        with server.client() as c:
            return complete(c, prompts[i], i % 2 == 0)

    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(own_client, range(16)))
    assert together == alone

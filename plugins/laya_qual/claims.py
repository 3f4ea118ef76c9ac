"""The claim catalogue: every property the qualification suite can vouch for.

A claim id is stable (reports from different releases are compared by id); its
statement says exactly what a ``passed`` verdict means. docs/claims.md is
generated from this module (``laya-qual claims --markdown``) and a test keeps
the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


def _catalogue(*claims: Claim) -> dict[str, Claim]:
    ids = [c.id for c in claims]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise ValueError(f"claim ids catalogued twice: {sorted(duplicated)}")
    return {c.id: c for c in claims}


CLAIMS: dict[str, Claim] = _catalogue(
    # --- artifact: artifact-v1 reading and writing -------------------------------
    Claim("artifact.roundtrip",
          "An artifact written by laya_qual.synth loads, and predicting the same request twice "
          "gives bitwise-identical probabilities and the same decision."),
    Claim("artifact.tamper",
          "Flipping any byte of any pinned file (every file role) makes loading fail with "
          "DigestMismatch naming that file; so does a manifest `size` one byte off the file's "
          "length while its sha256 is right, the message giving both sizes."),
    Claim("artifact.paths",
          "A manifest path that escapes the artifact directory, that the file system cannot open "
          "(a name past its limit, a file where a folder should be), or a pinned file that is a "
          "symlink, is refused with ArtifactError naming the path."),
    Claim("artifact.unlisted",
          "A file in the artifact directory that the manifest does not list is refused with "
          "ArtifactError naming it (its path inside the artifact)."),
    Claim("artifact.atomic-write",
          "write_artifact_files produces exactly the given files, byte for byte, plus a manifest "
          "pinning each (into a new name or an existing empty directory), or nothing: an OS error "
          "while writing any file (raised as a LayaError, `NAME: cannot be written (REASON)`), or a "
          "SIGINT just before publication, leaves the parent directory "
          "as it was (no directory under the name, no temporary beside it); an existing file or "
          "non-empty directory under the name is refused with a LayaError naming it and left untouched; "
          "the published directories and files have the modes of a plain write (0o777 and 0o666 less "
          "the umask)."),
    Claim("artifact.atomic-file",
          "laya.artifact.atomic.write_files (and write_file), the writer of the feature store and of "
          "laya-qual's keys and reports, publishes every file whole or leaves the parent directory "
          "as it was: an existing file, directory or dangling symlink under a name is refused with "
          "OutputExists naming it, also when the name is taken while the files are being written "
          "(the files already published by the call are removed again); a write cut short by an OS "
          "error (EFBIG) or a link failing with an error other than EEXIST or EPERM propagates as "
          "WriteFailed (a LayaError and an OSError with the OS's errno, one line `PATH: cannot be "
          "written (REASON)`) and leaves no temporary; on a filesystem without hard links (link fails with EPERM) the files "
          "are published by rename with the same outcomes."),
    Claim("artifact.manifest",
          "The manifest lists one entry per role (docs/artifact-v1.md): a head artifact missing any "
          "of the seven roles is refused by load_artifact, and a base load of one with a single head "
          "role, each naming manifest.json and field files; a role or path listed twice (or "
          "manifest.json itself listed) is refused naming the entry; the manifest or a pinned JSON "
          "file whose top level is not an object, a pinned path that is a directory, and an artifact "
          "directory that does not exist are refused with ArtifactError naming that path; "
          "write_artifact_files refuses an unknown role naming its path and field role, writing "
          "nothing; the unedited copy loads, and its base-only part loads as a base, also as the "
          "base_dir a head on it is loaded with."),
    Claim("artifact.tensors",
          "A weights file (encoder or head) holding a tensor the config does not imply, or an "
          "expected tensor in another dtype (float64 for float32) or shape (one row more), re-pinned, "
          "is refused at load with ArtifactError naming the file and that tensor; so is one missing an "
          "expected tensor (naming the first missing in sorted order, and how many more), and one whose "
          "header lists a tensor name twice (the first entry pointing at another tensor's bytes) or a "
          "key of one tensor's entry twice (naming that tensor); the file re-saved unchanged loads. A header "
          "laid out otherwise (entries reordered, tensors' bytes in another order, padding after the header, "
          "a tensor not 4-byte aligned) or mutated (offsets, shapes, dtypes, sizes) is loaded exactly when the "
          "safetensors library reads it, with the library's tensors, torch.equal; a gap, an overlap, a size "
          "other than the shape implies, bytes past the last tensor, or a header over 1 MiB (one of exactly 1 MiB loads) are refused naming the file."),
    Claim("artifact.vocabulary",
          "encoder_config's vocab_size must be at least the tokenizer's size, added tokens included "
          "(equal loads, one less is refused with ArtifactError naming the tokenizer file), and each "
          "special token id (cls, sep, pad, state, every option marker) must be in the tokenizer's "
          "vocabulary: an id below vocab_size that the tokenizer lacks is refused naming "
          "special_tokens.json and that field."),
    Claim("adapter.refuse.standalone",
          "A non-null `adapter` payload in the manifest is refused by load_artifact with "
          "UnsupportedAdapter."),
    Claim("artifact.limits",
          "Every limit in docs/artifact-v1.md holds at its boundary: a config dimension at its "
          "limit is not refused for range, one above it (up to 2^62) is refused naming file and "
          "field before anything that size is built, and so is one below an encoder dimension's "
          "lowest value (which is legal); a head's attention heads must divide hidden_size; JSON files of 1 MiB load and one byte more is "
          "refused, as is a tokenizer over 64 MiB, before being read; an encoder weights file over "
          "16 GiB or a head weights file over 256 MiB is refused naming the file before a byte of it "
          "is read (peak memory stays flat), and a head weights file of exactly 256 MiB is read and "
          "its sha256 pin checked; a valid 96 MiB encoder weights file is held once: loading it grows "
          "peak memory by at most 1.25 times its size; JSON nested past the parser's "
          "recursion limit is refused naming the file."),
    Claim("artifact.finite-weights",
          "A pinned weights file (encoder or head) holding a NaN or an infinity in any floating "
          "tensor is refused at load with an ArtifactError naming the file and the tensor, even "
          "when the manifest pins exactly those bytes."),
    Claim("artifact.fuzz",
          "One file of the artifact (any pinned role, re-pinned after the edit, or the manifest itself), "
          "mutated by laya_qual.synth.fuzz (bit flips, truncation, insertion, deletion, JSON values "
          "replaced by other types or extremes, deleted and repeated keys, safetensors header edits), is "
          "refused with a LayaError subclass or loads and serves probabilities that are finite, within "
          "[0, 1], sum to 1 and are bitwise equal standalone and shared. A repeated key or a number no "
          "finite JSON number spells (NaN, 1e999, 1e-999, past 4300 digits) in laya's own JSON is always "
          "refused, as is each named boundary edit, naming the file. Every example answers within 20x "
          "the clean artifact's load-and-serve time (at least 5 s)."),
    Claim("artifact.parse-hashed",
          "Every pinned file (every role) is parsed from the bytes that were hashed, by both loader "
          "families (load_artifact; load_artifact_base with or without a base directory, then "
          "load_artifact_with_base): when a file's bytes change on disk right after the loader "
          "hashed them, to a valid file that would change predictions, the loaded model predicts "
          "bitwise as the unchanged artifact, or the load is refused."),
    Claim("artifact.names",
          "A head.json task name or a manifest path holding a character of Unicode category Cc (NUL, "
          "tab, newline, DEL, C1), Cs (a lone surrogate) or Zl/Zp is refused by load_artifact with "
          "ArtifactError naming the file, the field (tasks[i].name, files[i].path) and the character's "
          "index, its message printing no such character; a task named with any other characters loads "
          "and is served under that name; `laya info` on such an artifact, or on a directory holding a "
          "file whose name is not UTF-8, exits 1 with exactly one `Error:` line on stderr and nothing "
          "on stdout."),
    Claim("artifact.fields",
          "Each documented field of the manifest (and of a manifest entry), encoder_config.json, "
          "special_tokens.json (and each option marker), sequence_format.json, head.json and a head's "
          "task object, changed alone in the file's JSON text to each JSON type docs/artifact-v1.md "
          "does not allow, or left out, is refused with ArtifactError naming the file and that field "
          "(a non-null manifest adapter with UnsupportedAdapter), as is an unknown field in each of "
          "those objects; the unchanged copy loads."),
    # --- request: typed validation and budgets ------------------------------------
    Claim("request.budget",
          "A request whose rendering exceeds the head's sequence budget, or whose option count "
          "exceeds its option budget, is refused with BudgetExceeded; nothing is clipped. A text "
          "(question, option, state) longer than the sequence budget times the tokenizer's characters "
          "per token (docs/serving.md) is refused naming its field before it is tokenized, one exactly "
          "that long is not; `laya predict` answers a 100 MB question so, serving the lines around it, "
          "under a 3 GiB address-space limit."),
    Claim("request.validation",
          "A request with a wrong-typed or empty field, or an unknown task, is refused with "
          "RequestError naming the field."),
    Claim("request.text",
          "A lone surrogate (U+D800..U+DFFF) anywhere in a request's task, question, an option or its "
          "state is refused by laya.Request with RequestError naming that field and the character's "
          "index, and an unknown field whose name holds one, a control character, NUL or a newline "
          "with RequestError naming the field with each surrogate as its \\uxxxx escape; in a real "
          "`laya predict` process each such line gets that error object while the lines around it are "
          "served as alone, the output stays UTF-8 JSON and the run exits 3; a prediction for an adapter "
          "id UTF-8 cannot carry (argv bytes that are not UTF-8) is written with \\u escapes."),
    # --- heads ---------------------------------------------------------------------
    Claim("heads.parity.int8",
          "An int8 head predicts within 0.02 absolute probability of the float32 head it was "
          "quantized from, and its dequantized readout rows keep an SQNR of at least 30 dB against the "
          "float32 rows (both read from the artifacts' bytes; the expected logit SQNR for isotropic states)."),
    Claim("heads.calibration",
          "Probabilities are softmax(scores / temperature) (float64 reference from head.json's and "
          "head.safetensors' bytes, within 1e-5) and the decision is `act` exactly when the top "
          "probability is >= act_threshold and the runner-up is < escalate_threshold, checked with "
          "thresholds exactly at and one float32 step around the served top and runner-up."),
    # --- forward: computation and rendering against an independent float64 reference --
    Claim("forward.reference.encoder",
          "VerifiedBase.encode's final states equal a float64 BERT reference written from "
          "docs/artifact-v1.md (reading the artifact's files itself) within 1e-5 per layer traversed, "
          "on the qualified artifacts and on random synthetic configurations, through either set of the "
          "packed forward's linear kernels (oneDNN's fused ones on the CPU, and torch's own, which GPUs run)."),
    Claim("forward.reference.float32",
          "A float32 head's probabilities equal the float64 reference forward's within "
          "||w_t||_1 * 1e-5 * layers / (2 * temperature) + 1e-6."),
    Claim("forward.reference.int8",
          "An int8 head's probabilities equal the float64 reference's (int8 weights times their "
          "per-output-channel scales) within the same derived bound."),
    Claim("forward.reference.transformer",
          "A transformer head's probabilities (role-type embeddings, its own post-LN layers, then "
          "the readout) equal the float64 reference's within the same derived bound."),
    Claim("forward.rendering",
          "Rendered token ids, roles and marker positions equal an independent renderer of the "
          "spec, and the encoder embeds them with the spec's token types, for questions, option "
          "counts, states and both state positions."),
    Claim("forward.rendering.reserved",
          "Text that tokenizes to any reserved id (CLS, SEP, PAD, STATE, a marker), in the question, "
          "any option or the state, is refused with RequestError naming that field."),
    Claim("forward.encode.inputs",
          "VerifiedBase.encode takes 1 to max_position_embeddings token ids, each an int in "
          "[0, vocab_size) (both ends of both ranges encode to [length, hidden] states); an empty "
          "or longer sequence is refused with RequestError naming token_ids, and an id out of range, "
          "a bool, a float or a string with RequestError naming token_ids[i]; encode_packed checks each of "
          "its sequences the same way and gives no sequences an empty list; VerifiedBase.render "
          "renders as many options as the base has markers and refuses one more with RequestError "
          "naming options."),
    Claim("forward.transformers.bert",
          "Every qualified base's final encoder states (the bases of the qualified artifacts, "
          "synthetic or --laya-artifact, and --laya-base) equal transformers.BertModel's, float64 "
          "with the base's config and tensors, within 1e-5 per layer."),
    # --- base: importing a Hugging Face BERT checkpoint (laya base import) ----------
    Claim("base.import",
          "On BERT checkpoints generated by transformers (BertModel with pooler, BertForMaskedLM with "
          "the bert. prefix and cls.* heads, and a TF-era gamma/beta bfloat16 copy), `laya base import` "
          "writes a base whose special tokens are the vocab.txt ids of [CLS], [SEP], [PAD], [unused0] "
          "(state) and [unused1]..[unusedK] (option markers, K = 8 by default, 2 to all [unusedN] "
          "tokens); whose every tensor is float32 and torch.equal to the checkpoint tensor "
          "docs/real-base.md maps it from (exactly the mapped set, pooler.*, cls.* and position_ids "
          "dropped); whose encoder_config equals config.json's fields, tokenizer is the checkpoint's "
          "bytes, sequence format is laya-seq-v1 and provenance names the sources' sha256; and which "
          "loads and encodes token sequences (lengths 1 to max_position_embeddings) as "
          "transformers.BertModel, float64, loaded from the checkpoint itself, within 1e-5 per layer. "
          "A non-BERT config, a tokenizer (added tokens included) larger than vocab_size, a missing "
          "vocabulary token, too few [unusedN], a tensor outside the encoder, missing, misshapen or "
          "float64, or an existing output is refused with ArtifactError "
          "naming file and field (or the path), writing nothing; the command writes the same bytes and "
          "prints the base's directory and every pin of its manifest (role, sha256, path); onto a full "
          "disk (EFBIG under a file-size limit) it exits 1 with the one line `Error: OUT: cannot be "
          "written (File too large)` and the parent directory as it was."),
    Claim("base.import.standalone",
          "`python -m laya.training.importer import HF_DIR OUT_DIR` exits 0 and writes byte for byte the base "
          "`laya base import` writes, printing the same lines; a checkpoint holding one encoder tensor "
          "under two names (a LayerNorm's weight or bias and its TF-era gamma or beta) is refused with "
          "ArtifactError naming model.safetensors and one of the two names, and fewer than two option "
          "markers with ValueError, writing nothing."),
    # --- shared base, adapters, cache, gate ----------------------------------------
    Claim("shared.parity.float32",
          "A float32 head predicts bitwise the same probabilities (torch.equal) standalone and "
          "through open_adapters on a shared base, with the cache off, cold and warm."),
    Claim("shared.parity.int8",
          "An int8 head predicts bitwise the same probabilities standalone and shared, with the "
          "cache off, cold and warm."),
    Claim("shared.parity.transformer",
          "A transformer head (with its own layers) predicts bitwise the same probabilities "
          "standalone and shared, with the cache off, cold and warm."),
    Claim("pins.refuse.encoder_config",
          "A head whose encoder config differs from the base's (same dimensions) is refused with "
          "PinMismatch naming pin encoder_config."),
    Claim("pins.refuse.encoder_weights",
          "A head whose encoder weights differ in any value (same shapes) is refused with "
          "PinMismatch naming pin encoder_weights."),
    Claim("pins.refuse.tokenizer",
          "A head whose tokenizer differs (same vocabulary size) is refused with PinMismatch "
          "naming pin tokenizer."),
    Claim("pins.refuse.special_tokens",
          "A head whose special-token ids differ is refused with PinMismatch naming pin special_tokens."),
    Claim("pins.refuse.sequence_format",
          "A head whose sequence format differs is refused with PinMismatch naming pin sequence_format."),
    Claim("pins.refuse.depth",
          "A head whose encoder depth differs is refused with PinMismatch naming pin depth."),
    Claim("adapter.refuse.shared",
          "A non-null `adapter` payload is refused with UnsupportedAdapter by load_artifact_base "
          "and load_artifact_with_base."),
    Claim("adapters.explicit",
          "Adapters.predict serves only an explicit, opened adapter id (UnknownAdapter otherwise), "
          "and the opened map cannot be changed."),
    Claim("adapters.arguments",
          "open_adapters refuses an empty adapter map and an adapter id that is not a non-empty "
          "string with UnknownAdapter naming adapter_id, and a cache budget that is not a "
          "non-negative int (a negative number, a bool, a float, a string) with ValueError; "
          "load_artifact_with_base refuses anything but a VerifiedBase with TypeError; budgets 0 and "
          "1 and a string id open."),
    Claim("calibration.private",
          "Changing one head's temperature or thresholds changes no other head's output, even "
          "for a same-named task, and the changed head serves its own new numbers."),
    Claim("weights.immutable",
          "An in-place write to loaded base or head weights is detected: the next prediction "
          "raises LayaError instead of serving edited weights."),
    Claim("cache.keys.exact",
          "Encoder-state cache entries are keyed by the base and every token id in order: a change "
          "in the question, any option or the state misses, a prefix never hits, and the same "
          "rendering hits (across tasks and heads on one base) serving the uncached prediction."),
    Claim("cache.eviction",
          "An entry of n tokens costs 4*n*hidden (float32 states) + 512 + 8*n bytes; cache bytes "
          "never exceed the budget, an entry exactly the budget's size is kept and one byte larger "
          "skipped, eviction follows LRU order, and hits/misses/evictions/entries/bytes match a "
          "reference LRU."),
    Claim("cache.copies",
          "The cache stores and returns copies: mutating an inserted or returned tensor changes "
          "nothing cached, and no two returned tensors share storage."),
    Claim("cache.bypass",
          "Instrumented (capture) passes neither read nor write the cache; without a cache "
          "(cache_bytes=0, the default) cache_stats() stays all zeros whatever is served."),
    Claim("gate.cancel.no-poison",
          "A cancel before, during (between layers) or after a forward raises Cancelled or "
          "returns the full result; a cancelled forward publishes nothing to the cache and lets go "
          "of the gate."),
    Claim("gate.concurrency",
          "Concurrent requests with random cancels never deadlock, equal a serial run, and leave "
          "cache stats consistent."),
    Claim("serve.soak",
          "8 threads serve 2000 mixed requests (per Hypothesis example) over every head under "
          "qualification (synthetic default: float32, int8 and transformer on one base) with a cache "
          "budget of about half the working set's bytes: a cancel set before the call always gives "
          "Cancelled, one firing at a random point gives Cancelled or the full prediction, a request "
          "without one completes; every completed prediction equals a serial cache-off run bitwise "
          "(probabilities, decision, head digest); over-budget and malformed requests get exactly their "
          "named LayaError (BudgetExceeded, RequestError, UnknownAdapter with the field); cache bytes, "
          "sampled during the run, never exceed the budget and match the entry count; counters never "
          "decrease; at the end completed <= hits + misses <= completed + cancelled, misses that left no "
          "entry or eviction are at most the cancelled ones, bytes equal the documented sizes of the "
          "cached sequences; no 10 s pass without a request finishing (no deadlock)."),
    Claim("serve.finite",
          "Finite weights that overflow float32 for some input (an embedding row of 3e38, a "
          "temperature of 1e-39) give a NumericError naming the stage (encoder states, scores, "
          "probabilities) and the artifact: no NaN or infinity is served, cached or written to "
          "JSONL, and requests that never touch the overflow are served bitwise as before."),
    Claim("serve.batch.exact",
          "Any list of token sequences (lengths 1 to 48, explicitly the shortest) encoded packed in one "
          "forward gives every sequence bitwise (torch.equal) the states it gets encoded alone; and "
          "Adapters.predict_many over any mix of requests, heads (float32, int8, transformer), cache "
          "budgets (off, below and above the working set) and batch sizes returns, in order, for each item "
          "exactly the prediction Adapters.predict gives it alone on a separately loaded base with the "
          "cache off (bitwise probabilities, decision, adapter id, head digest), and leaves the cache with "
          "the counters and entries predicting the same items one at a time would (Model.predict_many "
          "likewise, without a cache)."),
    Claim("serve.batch.cancel",
          "A cancel token that fires anywhere in a batch (at the gate, between encoder layers, in any "
          "item's head) ends predict_many with Cancelled and publishes nothing: the cache's counters and "
          "entries are as before the call, and the same batch afterwards is served as if it never ran."),
    Claim("serve.batch.errors",
          "In predict_many, an item that is not an (adapter_id, Request) pair, names an unknown adapter, "
          "is not a Request, names an unknown task or is over a budget gets its own error (the type and "
          "field predict raises for it alone), and every other item of the batch its prediction, bitwise "
          "as served alone."),
    Claim("jsonl.selectors",
          "`laya predict` JSONL: each line names its adapter; a bad line (bad JSON, non-UTF-8 "
          "anywhere in the line, JSON nested past the parser's limit, unknown adapter, bad fields, over "
          "budget, a non-finite answer) yields an error object with its line number; "
          "output order is input order; no line is lost; the command exits 3 when any line "
          "failed and prints the count on stderr."),
    Claim("jsonl.fuzz",
          "A JSONL stream of valid and mutated request lines (JSON edits of any field, byte edits, "
          "deep nesting, megabyte lines) gets exactly one output object per input line, in order: a "
          "prediction whose probabilities are finite, within [0, 1] and sum to 1, or an error object "
          "naming a LayaError subclass; every output is strict JSON (no NaN or Infinity); nothing "
          "escapes as an exception."),
    Claim("jsonl.hostile",
          "`laya predict` given valid request lines mixed with hostile ones (control characters, NUL "
          "and newlines in a question, a lone surrogate in any text field, an unknown field whose name "
          "is not text, a megabyte question, any other JSON value nested or huge, bytes that are not "
          "UTF-8), at batch sizes 1, 3 and 32, writes one UTF-8 JSON result line per input line, in "
          "order, each one line also to str.splitlines (U+0085, U+2028, U+2029 escaped): each valid line's prediction bitwise what Adapters.predict gives its request alone, "
          "each hostile line an error object of the documented type and field (RequestError naming the "
          "field, BudgetExceeded naming the question); it exits 3 when a line failed and 0 when none "
          "did, the stderr line count saying how many failed."),
    Claim("jsonl.wire",
          "Each field of a request line (adapter, task, question, options and each option, state), "
          "changed alone in the line's JSON text to each JSON type docs/serving.md does not allow, or "
          "left out when required, and any unknown field, gets an error object naming that field while "
          "the other lines of its chunk are served as alone; a line with its optional state, without it "
          "and with `\"state\": null` is served as the request with and without the state."),
    Claim("jsonl.chunks",
          "`laya predict --batch-size N` reads its input in consecutive chunks of up to N lines, a blank "
          "line counting as a line, and a chunk never waits for a line that has not arrived: from a real "
          "pipe whose writer stays open, the lines written so far come at once as groups of N, the last "
          "group shorter; a last line without its newline, then the end of input, is a chunk of its own."),
    Claim("jsonl.command",
          "`laya predict` exits 0 when every line was served and with --allow-errors when some "
          "failed (the same output lines, the failed count on stderr), 1 naming the path when the "
          "adapters cannot be opened and 2 for an --adapter that is not ID=DIR or repeats an id, "
          "with nothing on stdout; a run ends with exactly two stderr lines, the cache's counters (hits, "
          "misses, evictions, entries and the documented bytes of an LRU that evicts, all 0 without a "
          "cache) and the line and failed counts; SIGINT or SIGTERM end it with exit status 130 or 143, 'interrupted "
          "by' the signal and the line counts on stderr, the output holding exactly the finished "
          "chunks' complete lines, and a signal arriving while a chunk's lines are being written "
          "waits until the chunk's last line is out; run off the main thread it serves and leaves "
          "the signal handlers as they were."),
    Claim("cli.help",
          "`laya --help` exits 0 listing every subcommand (base, evolve, info, predict, train), each "
          "with the start of its own help text, without importing torch."),
    Claim("cli.reference",
          "Every command of `laya` (laya, base, base import, evolve, evolve check, evolve plan, info, "
          "predict, train; lazily loaded ones resolved through the group) declares exactly the CLI "
          "reference shipped with the suite (laya-cli-reference.json, rendered as docs/cli.md): its help "
          "text, subcommands and help options, and per argument and option, in order, the option "
          "strings, metavar, type with its flags (choices, range bounds, path exists/file_okay/dir_okay), "
          "required, default, show_default, help text, multiple and flag settings; and each command's "
          "`--help` (80 columns) shows its usage and help text, lists its subcommands, and gives every "
          "option a row, in declared order, with its option strings, help text, [required], shown "
          "default, metavar and choices."),
    Claim("artifact.info",
          "`laya info DIR --json` prints, as one JSON object with two-space indents, the artifact's head "
          "kind, budgets, tasks (name, max "
          "options, temperature, thresholds) and every manifest entry (role, path, sha256) as "
          "head.json and manifest.json hold them, and the head digest of docs/artifact-v1.md; "
          "the text form shows the same values, a line for the artifact, the budgets, each task and "
          "each pin, as the command's help describes; a refused artifact exits 1 naming the file, "
          "printing nothing on stdout."),
    # --- bench: benchmark claims (measured, never asserted) --------------------------
    Claim("bench.cache.hit-vs-miss",
          "Adapters.predict with a warm cache and with a cold one return equal predictions; "
          "their median latencies and ratio were measured side by side in one run."),
    Claim("bench.runtime.overhead",
          "Adapters.predict equals a bare torch forward of the same encoder and head bitwise; "
          "the runtime's overhead ratio over it was measured side by side."),
    Claim("bench.int8.cost",
          "The per-request cost of an int8 head and of a float32 head on the same warm base "
          "was measured side by side."),
    Claim("bench.memory.shared-heads",
          "N heads on one shared base hold exactly (N-1) base copies fewer weight bytes than N "
          "standalone models; both totals are recorded."),
    Claim("bench.serve.batch",
          "predict_many over a fixed mixed-length request set, in batches in arrival order, returns "
          "bitwise the predictions of the same requests predicted one by one; the throughput of both "
          "(requests per second) and, where transformers is installed, of transformers.BertModel (sdpa, "
          "dynamic padding, the same base) encoding the same token ids, and where the onnx extra is "
          "installed, of that model exported to ONNX Runtime (CPUExecutionProvider, all graph "
          "optimizations, the same thread count), each peer in the same batches and, as its best, in "
          "length-sorted batches (longest first, as sentence-transformers batches; every item's states "
          "put back in request order, the first batch's items' states within 1e-4 of laya's), and the "
          "rows each computes, were measured side by side in one run; a peer that is not installed is "
          "not measured."),
    Claim("bench.learner.speedup",
          "On a seed-shaped parent (seed-small), the feature learner and the 3-process distributed "
          "kernel run side by side in one run are bitwise equal at every update and in the "
          "serialized final tail; feature-production time, median per-update times of both arms, "
          "bytes sent, peak memory, their speedup, the FLOP-model limit and the limit from measured "
          "times (owners' prefix compute + hand-offs + step, over the step) were recorded, with the "
          "machine's load average and each process's CPU seconds next to its wall time, and each "
          "process's memory after start under its own name (owner 0, owner 1 and the kernel's learner "
          "rank: what their group recorded for ranks 0, 1 and 2 when it started); every update of each "
          "arm took time, and each part (the kernel's updates, the owners' compute, the learner's load "
          "and updates) fits in its whole. Every figure follows "
          "from the rank's record it names (docs/benchmarks.md), also on drawn records in which every "
          "rank's values differ and the arms differ at an update, in the final tail or in how many "
          "updates were compared."),
    # --- train: frozen features, zero-layer heads, calibration, certification, export --
    Claim("train.store.identity",
          "A frozen feature store is refused (FeatureStoreMismatch naming the field) for a base "
          "differing in any one pinned file (encoder_config, encoder_weights, tokenizer, "
          "special_tokens, sequence_format), another kernel identity or numeric profile, one "
          "different token in the sequences, one marker read at another position, or one flipped "
          "byte of its features."),
    Claim("train.store.format",
          "A feature store file that is not a laya-feature-store-v2 (another format in its binding, "
          "no binding in the safetensors header, tensor bytes safetensors cannot read, not "
          "safetensors at all) is refused with FeatureStoreMismatch naming field format and the "
          "file, and a store opened for another number of sequences naming field sequences; a store "
          "built without a progress callback is byte-identical to one built with it (which is "
          "called once per sequence)."),
    Claim("train.export.parity",
          "A trained head exported as float32 or int8 predicts bitwise the same probabilities "
          "standalone and shared; they equal, bitwise, the probabilities its calibration and "
          "certification judged from the feature store, and the runtime acts on exactly the "
          "certified dev_conf set."),
    Claim("train.export.int8",
          "An int8 export's tensors are, bitwise, the documented per-row symmetric quantization of the "
          "float32 readout (scale = max|w| / 127 in float32, q = w / scale rounded half to even and clamped "
          "to ±127, a row of zeros scale 1 and q 0; the bias unchanged), checked against a NumPy reference on "
          "drawn readouts with zero rows and on explicit ties at .5."),
    Claim("train.export.limit",
          "A trained head whose head.json would exceed the 1 MiB limit of a JSON file in an "
          "artifact is refused with ArtifactError naming head.json and the limit before anything "
          "is written; the same head with fewer tasks, under the limit, is written and loads."),
    Claim("train.warmstart.clone",
          "A warm start shares no storage with its source head; training from it leaves the "
          "loaded source's tensors and predictions and its artifact's file bytes unchanged."),
    Claim("train.warmstart.refuse-transformer",
          "Warm-starting the zero-layer trainer from a head with transformer layers is refused "
          "with TrainingError, and `train` writes no artifact."),
    Claim("train.warmstart.tasks",
          "Warm-starting from a head that lacks a task the dataset trains is refused with "
          "TrainingError naming the field `task`, the example's task and the head's tasks; "
          "`train` writes no artifact."),
    Claim("train.temperature.nll",
          "For over- and under-confident heads (property over seeds), the temperature fitted on "
          "dev_cal strictly lowers the served dev_cal NLL and lies on the side of 1 that undoes "
          "the miscalibration."),
    Claim("train.temperature.separable",
          "The fitted temperature follows the documented rule, recomputed with scipy (property "
          "over score sets, with each boundary as an explicit example): T is the NLL minimiser "
          "over [1/16, 16], exactly the bound when the minimum lies at or beyond it; a dev_cal "
          "with fewer than 30 examples or separable (every label top-scored) keeps T = 1. A head "
          "whose dev_cal is separable records that outcome, the bounds and the minimum in "
          "head.json, the train summary warns (and does not for an ordinary fit, whose summary gives "
          "head.json's NLL and ECE before and after), and it serves "
          "every dev_cal and dev_conf request probabilities strictly between 0 and 1."),
    Claim("train.temperature.not-better",
          "On dev_cal score sets whose float64 NLL minimiser is T = 1 (seeded, centred with scipy), "
          "the fitted temperature is 1 to within 1e-6 and never serves a worse float32 NLL than "
          "T = 1; where the fit would (the listed seeds), T is exactly 1 with outcome not_better and "
          "equal recorded NLLs before and after."),
    Claim("train.certify.bound",
          "The Clopper-Pearson bound and binomial p-values equal scipy's (the p-values elementwise, in "
          "the broadcast shape of their arguments, empty ones included); the certifier equals a "
          "reference fixed-sequence procedure (documented grid, dev_cal start, stop at the first "
          "failure) on random outcome sets; in simulation, certified thresholds' true acted error "
          "exceeds the target no more often than delta allows, and where every threshold's risk "
          "equals the target certification is that rare (one-sided binomial tests, false-alarm "
          "rate 0.1%); an uncertifiable task escalates every request."),
    Claim("train.splits.disjoint",
          "Training refuses a dataset whose splits share an example id or an exact token sequence."),
    Claim("train.splits.complete",
          "Training refuses a dataset read from JSONL text with an empty train, dev_cal or dev_conf split "
          "(DatasetError naming split), and one in which a task has no dev_cal or no dev_conf examples "
          "(TrainingError naming that split, no head written)."),
    Claim("train.calibration.private",
          "Two heads trained from one store for a same-named task keep their own temperature, "
          "threshold and certificate; training the second leaves the first's bytes unchanged, and "
          "each serves the same standalone as side by side. No part of a head's or its base's parsed "
          "configuration (tasks, calibration, reliability bins, certification, path) can be edited in "
          "place, head.tasks is a copy, and every dataclass the runtime defines is frozen: what a "
          "caller holds cannot change what is served."),
    Claim("train.provenance",
          "In a head trained on two tasks, each task's temperature is the NLL minimiser on that "
          "task's dev_cal alone and its act threshold, acted count and errors are the fixed-sequence "
          "result on that task's dev_conf alone (recomputed with scipy); head.json names those "
          "splits with their sizes and digests."),
    Claim("train.soft-targets",
          "With soft targets, a few full-batch Adam steps of the zero-layer trainer equal a float64 "
          "reference minimising cross-entropy against the whole target distribution."),
    Claim("train.minibatch",
          "The zero-layer trainer's mini-batches follow the documented order (per epoch torch.randperm "
          "from one CPU generator seeded with the seed, cut into batch_size, the last batch shorter) and "
          "each is one Adam step on its examples' mean cross-entropy (hard labels or soft targets): "
          "the trained readout equals a float64 reference step for step."),
    Claim("train.dataset.parse",
          "A bad dataset line (not JSON or UTF-8, unknown or missing field, bad split, label, "
          "target or options) is refused with DatasetError naming its 1-based line and the field."),
    Claim("train.dataset.empty",
          "A dataset file without a single example (empty, or blank lines only) is refused with "
          "DatasetError saying it has no examples."),
    Claim("train.command",
          "`laya train` run as its own module (python -m laya.training.train_cli) on a two-task dataset exits 0, "
          "writes a head that loads with exactly the dataset's tasks and the feature store at the "
          "default OUT.features.safetensors, and prints the documented summary, every line restating "
          "head.json and the manifest (a certified and an uncertified task), with the progress of "
          "encoding and of training on stderr; an existing non-empty --out exits 1 naming it, writing "
          "nothing."),
    Claim("train.api",
          "The training library refuses arguments outside their ranges with ValueError: certify's "
          "target_risk or delta outside the open interval (0, 1), fit_temperature without an example, "
          "head_tensors for a kind other than float32 or int8, a TrainConfig with epochs or batch_size below "
          "1 or a learning rate that is not a positive finite number (naming the field; `laya train "
          "--learning-rate inf` is a usage error naming the option); task_entry without calibration or "
          "certification writes a task with neither (both optional in docs/artifact-v1.md), which "
          "loads with its own act threshold."),
    Claim("train.reproducible",
          "Training twice from the same dataset, store and seed exports byte-identical artifact "
          "files; another seed changes the weights."),
    Claim("train.record.reliability",
          "For every task of a trained float32 and int8 head, head.json's reliability_before and "
          "reliability_after are the 15 equal-width bins of the ECE over that task's dev_cal, as "
          "served at T = 1 and at the task's temperature: counts and accuracies equal, and mean "
          "confidences within 1e-6 of, a float64 recomputation from the head's bytes; each "
          "recorded diagram's ECE is the recorded ece_before / ece_after."),
    Claim("train.record.path",
          "certification.path lists every threshold the fixed-sequence procedure tested, in order "
          "from the dev_cal start down to and including the first failure, each with its acted "
          "count, errors and Clopper-Pearson bound, equal to a scipy reference (on random outcome "
          "sets and on a trained head's dev_conf); its last pass is the certified threshold."),
    Claim("train.record.parse",
          "head.json's recorded reliability diagrams and certification path are optional (a head "
          "without them loads) and parsed strictly: a wrong type or range, an unknown field, bins "
          "out of order, not covering [0, 1] or not summing to examples, an ECE that is not the "
          "bins', a path not descending, going on past a failure or stopping at a pass, or one "
          "disagreeing with the certificate is refused with ArtifactError naming head.json and the "
          "field."),
    Claim("train.certification.rules",
          "head.json's certification rules (docs/artifact-v1.md) are enforced at load: a certification "
          "whose temperature is not the task's, a certified task whose escalate_threshold is not 1.0, "
          "acts on no example or bounds its risk above target_risk, an uncertified one that acted or "
          "whose act_threshold is not 1.0, a coverage other than acted / examples, a split_sha256 "
          "that is not 64 lowercase hex digits, and a task that is not an object are each refused "
          "with ArtifactError naming head.json and that field; the consistent certified and "
          "uncertified tasks load and the uncertified one escalates every request."),
    # --- learner: laya.evolution (section owned by the evolution work) --------------
    Claim("learner.exact.appended",
          "Appended layout: over 8 Adam updates every loss, gradient norm, parameter and Adam state "
          "(step, exp_avg, exp_avg_sq) of the feature learner, trained from feature packets saved and "
          "reloaded, is bitwise equal (torch.equal) to the 3-process gloo distributed incremental "
          "kernel's; Hypothesis varies seeds, widths, depths, cut and owner-split points, padding and "
          "microbatch sizes."),
    Claim("learner.exact.fixed-tail",
          "Fixed-size tail control (last two blocks retrained, retention to the original blocks' "
          "output): the same bitwise equality of every loss, gradient norm, parameter and Adam state "
          "over 8 updates, with both the feature and the reference stream saved and reloaded."),
    Claim("learner.rejects.parent",
          "A feature packet offered to a learner whose committed parent digest differs is refused "
          "with FeaturePacketError naming field `parent`."),
    Claim("learner.rejects.tokenizer",
          "A packet offered with a different tokenizer (even one giving the same ids) is refused "
          "naming field `tokenizer`."),
    Claim("learner.rejects.token-ids",
          "A packet offered for a microbatch with one different real token id is refused naming "
          "field `token_ids`."),
    Claim("learner.rejects.padding",
          "A packet offered for a microbatch with one different padding token is refused naming "
          "field `padding`."),
    Claim("learner.rejects.numeric-profile",
          "A packet produced under a different numeric profile (threads, dtype, torch version, "
          "deterministic algorithms, TF32 matmuls, cuBLAS workspace) is refused naming field "
          "`numeric_profile`."),
    Claim("learner.rejects.cut-layer",
          "A packet offered to a learner that cuts the parent at a different layer is refused "
          "naming field `cut_layer`."),
    Claim("learner.rejects.layout",
          "A packet offered to a learner with a different layout (tail shape) is refused naming "
          "field `layout`."),
    Claim("learner.rejects.labels",
          "A packet offered with shifted labels is refused naming field `labels`."),
    Claim("learner.rejects.objective-weights",
          "A packet offered with a different retention weight or token weights is refused naming "
          "field `objective_weights`, and so is a microbatch whose token weights are all 0 (the "
          "weighted loss would be 0/0) or include a negative one, even with a packet bound to exactly "
          "those weights."),
    Claim("learner.rejects.head-state",
          "A packet offered to a learner whose read-only output-head replica differs in one value "
          "is refused naming field `head_state`."),
    Claim("learner.rejects.features",
          "A packet whose feature bytes no longer hash to the bound digest (one byte flipped) is "
          "refused naming field `features`; the streams are parsed from the very bytes that were "
          "hashed, so a file that changes after hashing never reaches the learner."),
    Claim("learner.regroup",
          "Regrouping or reordering the same examples into different microbatches yields packets "
          "with different bindings, and a packet is refused (field `token_ids`) for any microbatch "
          "but the exact one it was produced for."),
    Claim("learner.smaller",
          "The learner's trainable tail plus read-only head holds fewer parameter bytes than the "
          "whole parent, for both layouts and every named configuration; both sizes are reported "
          "and a learner that is not smaller is refused."),
    Claim("learner.certify.parent",
          "The single-process audit certifies packets the committed parent produced, and refuses "
          "(field `features`) a packet whose feature stream, or only its fixed-tail reference "
          "stream, came from a different parent although its manifest claims the committed "
          "parent's digest."),
    Claim("learner.certify.binding",
          "A learner that requires certification refuses an uncertified packet or one whose "
          "certificate belongs to another packet (field `certificate`; also another packet bound to the "
          "same features, parent and input), and every update record "
          "carries the digest of the certificate it trained on."),
    Claim("learner.group.bounded",
          "When a rank of the 3-process group dies mid-job, or a job outlives its timeout, the "
          "caller gets DistributedError naming the rank(s) within bounded time and every process "
          "of the group is stopped."),
    Claim("learner.group.faults",
          "A non-zero rank that hangs before joining the rendezvous (the other ranks' own store timeouts "
          "firing first) or in the middle of feature production (the others blocked in gloo) ends in "
          "DistributedError whose message and fields name the phase and that rank alone, told from the "
          "ranks waiting on it by where each was stuck, within the missed timeout plus the group's "
          "grace, stack-dump and shutdown allowances; every worker pid is reaped, no child process or "
          "file of the private rendezvous directory is left, and a fresh group on the same machine "
          "then answers a collective job correctly."),
    Claim("learner.oracle.update",
          "Each of 8 updates of the feature learner matches, from the learner's own previous state, "
          "a float64 reference written from the documented objective (tail blocks, final norm + tied "
          "matrix, token-weighted cross entropy, + retention weight x MSE to the reference stream for "
          "the fixed-tail control) and torch.optim.Adam's documented update: loss (rel. 1e-5), "
          "Adam step count, exp_avg and exp_avg_sq (float32 gradient error bound: 1e-5 of the largest "
          "gradient entry + 1e-6), gradient norm (rel. 1e-4 + sqrt(entries) x that bound) and "
          "parameters (rel. 1e-5 of the step); Hypothesis varies both layouts, tail size, cut, lr, betas, eps, weight decay, retention "
          "weight and token weights (0 or 2^-10..4). The packet's feature stream it trains on equals the parent's "
          "embedding and first cut blocks recomputed in float64 (rel. 1e-5)."),
    Claim("learner.oracle.retention",
          "Fixed-tail control: the trainable blocks start bit for bit as the parent's last two "
          "blocks; the reference stream (and the feature stream) the learner trains on is bitwise "
          "the packet's and unchanged after 8 updates, and equals the parent's original last two "
          "blocks recomputed in float64 on the packet's features (rel. 1e-5)."),
    Claim("learner.plan.storage",
          "`laya evolve plan` prints, for every named configuration (each with the shape "
          "docs/evolution.md's table gives it) and both layouts, per-packet "
          "bytes = microbatch x sequence x width x 4 per stream (1 stream appended, 2 fixed-tail), "
          "per-stream bytes = batches x that, total = streams x per-stream, head replica = "
          "4 x (vocab x width + 2 x width); for parent-1.7b over 128 batches (its defaults), and for no "
          "other schedule, it ends with the predecessor design's 13.82 GB stream beside its own per-stream "
          "figure and the 13180 positions per batch that figure means at width 2048 (docs/evolution.md); "
          "and a packet the runtime writes holds exactly the planned tensor bytes; a count (--batches, "
          "--microbatch, --updates) below 1 is a usage error naming the option (exit 2), nothing printed."),
    Claim("learner.plan.transfer",
          "`laya evolve plan` prints, per layout, the bytes one prefix request sends: ids = microbatch x "
          "sequence x 8 (learner to owner 0), activations = microbatch x sequence x width x 4 (owner 0 to "
          "owner 1), streams = that x streams (owner 1 to learner), ids + streams between nodes (owners | "
          "learner); for U updates over B batches the kernel sends U x that, the learner's arm B x that and "
          "writes and reads its packets once; and real distributed production and kernel runs send exactly "
          "those bytes from each rank."),
    Claim("learner.plan.flops",
          "The FLOP model behind the speedup limit counts, per token of one update, what "
          "docs/evolution.md states: kernel = cut blocks + (2 reference blocks, fixed-tail) + learner; "
          "learner = 3 x tail blocks (forward + backward) + 2 x head (forward + input gradient); one "
          "block = 2 x (4 width^2 + 2 width x mlp) + 4 x sequence x width, head = 2 x width x vocab."),
    Claim("learner.torchrun",
          "The check as each rank of `python -m laya.evolution.run check` runs it once it has joined a "
          "3-rank gloo group (laya.evolution.run's Ranks, run in the suite on the in-process group's "
          "ranks) gives every rank the rows of run_arms on the in-process Group (equal floats) and leaves "
          "the workspace, audited packets included, in --workdir; a real `torchrun --standalone "
          "--nproc-per-node 3` of it exits 0 with the learner rank's table and --json rows equal to "
          "those rows; a --workdir that is "
          "not empty makes every rank raise the same DistributedError naming the job laya.evolution.run."
          "_prepare and rank 0 (each rank itself when the job runs on all ranks), writing nothing; a "
          "--workdir that is other files on some ranks (same path) is refused on every rank naming each "
          "rank that cannot read the committed parent or reads another file; a start without "
          "torchrun's RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT is refused naming the missing ones, "
          "and one with WORLD_SIZE other than 3 exits 2 naming it, before any work; so does a count below 1 "
          "or a --timeout-s not above 0, a usage error naming the option. A rank leaves with its status "
          "once its exit handlers have run, what it printed to a pipe written out."),
    Claim("learner.compare",
          "The arms' comparison (laya.evolution.compare) names, per update, exactly the tensors that "
          "differ, even by one ulp: loss, gradient norm, each parameter, each Adam slot (step, exp_avg, "
          "exp_avg_sq); records over different parameter names are reported as such, and records of "
          "different lengths are refused with ValueError naming both lengths."),
    Claim("learner.check.report",
          "`laya evolve check`'s report (laya.evolution.cli.report_check, also the torchrun learner rank's) "
          "prints one row per update, `yes` or `NO:` followed by the differing tensors, and the size line "
          "(tiny: learner 114176 bytes < parent 217856 bytes); its --json holds the rows, `equal`, "
          "`handoff_device` (cpu for CPU ranks) and per update each arm's state digest, equal where the "
          "arms are bitwise equal and different from one update to the next; any difference exits 1 with "
          "MISMATCH on stderr; run_arms bounds each of its jobs by the caller's timeout_s, and an error "
          "that stops the command's group (a job past --timeout-s) exits 2 with "
          "`Error:` and the cause, no table, no JSON; `--device cuda` where torch sees no CUDA device is "
          "a usage error naming "
          "--device (exit 2) before any rank starts, and so is a count (--updates, --microbatch, "
          "--microbatches) below 1, which Experiment refuses with ValueError naming the field."),
    Claim("learner.group.errors",
          "A rank that raises in a job on several ranks stops the group with DistributedError naming the "
          "job and that rank alone, its cause the rank's own error with the worker's traceback noted; a "
          "rank whose wait on a peer fails (a gloo timeout) while the others answer is named as having "
          "lost its peers, with the wait it noted (waiting_on keeps the error itself and notes the peer); "
          "every worker of a stopped group is gone and the group starts afresh on its next job; a job on "
          "one rank whose error cannot be pickled raises DistributedError naming the rank and the error's "
          "repr, and the group stays up; a spawn that fails after a first worker started raises its own "
          "error, that worker gone and the private directory removed; a start that misses its "
          "start_timeout_s while the worker cannot dump a stack yet names that rank with its stack "
          "unavailable, within the timeout plus the dump and shutdown allowances, no process or private "
          "directory left; a group whose private directory was removed under it (a temporary-files "
          "cleaner) still closes, its workers gone; a graceful close asks each worker to leave and waits "
          "up to 5 s for it to end by itself, so the worker's own exit handlers run to their end; closing "
          "a group one of whose workers died between jobs raises nothing and lets the living ones end so; "
          "a 1-rank "
          "group runs its startup hook, then its jobs "
          "without a process group, and its worker exits by itself with status 0 when the "
          "orchestrator's end of its pipe closes."),
    Claim("learner.experiment.limits",
          "An evolution experiment refuses with ValueError naming the value: an unknown layout; a "
          "fixed-tail control with other than two tail blocks or with a cut; a cut outside 0..depth (0 and "
          "depth accepted, depth by default; fixed-tail cuts at depth - 2, so a 1-block parent is refused); "
          "a parent width its heads do not divide; an owner split outside 0..cut (0 and cut accepted); a "
          "microbatch row of fewer than 2 or more than sequence tokens. Rows of 2 and of sequence tokens "
          "are right-padded with the pad id, labelled with the next token and -100 past their end, and "
          "weighted 0 exactly where they have no label."),
    Claim("learner.placement",
          "Where ranks compute follows docs/evolution.md, GPUs: CPU ranks on the CPU over gloo; with CUDA "
          "the node's k-th rank on cuda:k when the node has at least as many GPUs as ranks, else every "
          "rank on cuda:0, a node without a GPU refused with DeviceError naming the local rank, and the "
          "backend cpu:gloo,cuda:nccl; hand-offs go GPU to GPU only when every rank has a GPU and no two "
          "share one; `cuda` where torch sees no CUDA device is refused with DeviceError naming torch's "
          "version before any work (checked on machines without CUDA)."),
    Claim("learner.rejects.manifest",
          "A packet directory whose binding.json is absent, not JSON, of another format than "
          "laya-feature-packet-v1, or binds other fields than the documented eleven is refused with "
          "FeaturePacketError naming binding.json; one whose feature file holds other streams than the "
          "reader's layout needs (features, plus reference for fixed-tail), all else bound, is refused "
          "naming field `layout` and features.safetensors; a well-formed packet loads its stream bitwise."),
    Claim("learner.certify.parent-file",
          "The audit refuses a workspace whose parent file is not the committed parent (another valid "
          "parent written in its place) with FeaturePacketError naming field `parent` and the parent file, "
          "before reading any packet or writing any certificate."),
    # --- report: signed qualification report (section owned by the report work) -----
    Claim("report.verdicts",
          "Every catalogued claim appears in the report: `failed` if any of its tests failed, "
          "`passed` if one passed and none failed, otherwise `not evaluated`; the result is "
          "FAILED if any claim failed or any test module failed to collect (that module is then a "
          "failed test of the test-result statement), WARNED if any claim was not evaluated, PASSED otherwise."),
    Claim("report.written",
          "`pytest -p laya_qual --laya-report PATH` or `--laya-evidence-out PATH` whose write fails "
          "at the end of the run with an OS error (a full disk: EFBIG under a file-size limit) ends "
          "in exactly one line `ERROR: OPTION PATH: cannot be written (REASON); what was there before "
          "is kept`, no traceback, exit status 3, the file earlier at PATH unchanged byte for byte and "
          "no temporary left beside it."),
    Claim("report.xdist-equal",
          "The report's claims, verdicts, test node ids and outcomes are identical whether the "
          "suite ran in-process (-n 0) or on xdist workers (-n 2) with the benchmarks measured in "
          "a serial pass merged into the same report (as laya-qual run does); benchmark figures "
          "may differ, their verdicts may not."),
    Claim("report.signature",
          "Every laya-qual line of a bundle is a DSSE envelope whose signature over the DSSE PAE "
          "verifies with the signer's public key (plain or encrypted PEM, or a securesystemslib "
          "signer URI) and fails with any other key or unsigned; a development-key report says so."),
    Claim("report.interop",
          "A bundle verifies with securesystemslib's DSSE Envelope and its statements pass the "
          "in-toto-attestation Statement, ResourceDescriptor and test-result schemas; verify ignores "
          "unrecognised lines; no absolute local path is signed; suite test ids do not depend on "
          "how the suite was started."),
    Claim("report.verify.tamper",
          "Changing any single byte of any bundle line makes `laya-qual verify` fail."),
    Claim("report.verify.fuzz",
          "A signed bundle mutated by laya_qual.synth.fuzz (byte edits, envelope JSON edits, payload "
          "edits keeping the signatures) is refused with VerifyError, or is accepted only with "
          "statements equal to those that were signed; nothing else escapes, within 5 s."),
    Claim("report.verify.agreement",
          "A validly signed statement that disagrees with its companion (result, test lists, "
          "subjects, claim verdicts vs evidence) makes `laya-qual verify` fail; so does one whose "
          "invocation names a module that did not collect while its result is not FAILED or its "
          "failedTests leave that module out."),
    Claim("report.subjects",
          "Subject digests are in-toto dirHash (and the model-signing digest of file digests) as "
          "docs/report-format.md defines them, dot-files and nested files included; changing one "
          "byte of one artifact file changes its digest and `laya-qual verify --artifact` fails; it refuses "
          "in one line, never digesting through or around them, a directory that is a symlink, a file in it "
          "that is a symlink or no regular file (a FIFO), and a file name that is not UTF-8."),
    Claim("report.synthetic-default",
          "A qualification run given no --laya-artifact signs the synthetic default it tested, as "
          "docs/report-format.md defines it: four artifact subjects of role synthetic (float32, int8, "
          "transformer and a trained float32 head), each the dirHash of the very directory every xdist worker "
          "was handed, none a nomination, each with its heads entry; the trained head's clean task certified "
          "and its noisy task not, both with reliability bins and a certification path; the directories "
          "removed when the run ends; and a second pass refuses evidence whose subjects differ from its own."),
    Claim("report.mutants.bound",
          "A sampled-mutant kill rate (suite.mutantSample) carries K of N with the one-sided 95% "
          "Clopper-Pearson lower bound of K/N, the quantile of Beta(K, N-K+1) at 0.05 (0 for K = 0); "
          "a results file given with --laya-kill-rate carries exactly that bound of its counts, overall "
          "and per part, K counting the shipped suite's kills only, and apart from it a second figure "
          "whose K adds the project's own tests' kills."),
    Claim("report.mutants.judged",
          "laya-qual mutate --sample judges each drawn mutant as docs/mutation.md's \"Per mutant\" says: "
          "one no suite process executed is survived without a run; otherwise its covering suite tests run "
          "on the mutated copy fastest first (an untimed test counts 0 s, ties by node id), serially unless "
          "their baseline time exceeds 30 s, then the whole suite fastest first to confirm a survivor (always "
          "for an import-time mutant), each with --timeout or else four times its baseline seconds plus 120, "
          "at least 300; a run that fails or times out kills only if the same tests, in its order, through "
          "the first failing one (all of them when it names none), pass on an unmutated copy and fail or time "
          "out on the mutant again, both runs recorded, and the first stage that kills ends the mutant; a "
          "time box keeps the first K drawn before the first that never started, says so, and is an error "
          "when none started."),
    Claim("report.verify.gate",
          "`laya-qual verify` exits 0 only for an authentic report whose result is at least "
          "--require-result (default WARNED: a FAILED report is rejected) and whose --require-claim "
          "claims passed; 3 for an authentic report that falls short; 1 for one that is not authentic."),
    Claim("report.verify.duplicate-keys",
          "A bundle whose envelope or statement payload holds a JSON object with a repeated key makes "
          "`laya-qual verify` fail (exit 1, the error naming the duplicate key), even when every "
          "signature verifies and reading the last value of each key would give the signed statements."),
    Claim("report.predicate",
          "The laya-qual predicate of a real run says what docs/report-format.md defines: `counts` "
          "tallies the claims' verdicts; `environment` is the interpreter, package versions, logical "
          "cores, GPU, torch threads, thread and determinism settings, device and runtime checkout of "
          "the process that ran; `invocation` records pytest's exit status and names every module that "
          "failed to collect by its report test id; `nominations` names every artifact the run qualified (each "
          "--laya-artifact and the --laya-base); `scope` states mechanics only and lists what is not "
          "qualified."),
    Claim("report.figures.mutants",
          "A sampled mutation run's figure (its summary) counts, overall and per part (runtime, harness), "
          "as docs/mutation.md defines: N is every mutant but those filed equivalent before the draw; the "
          "headline's K only the shipped suite's kills (killed, timed out, or a wrong equivalence), the "
          "second figure's K adds the project tests'; each with the one-sided 95% Clopper-Pearson lower "
          "bound; a reason filed late leaves its mutant a survivor (listed apart), a failure that did not "
          "reproduce is listed, kills by tests/ only are listed."),
    Claim("report.figures.coverage",
          "A `laya-qual coverage` figure counts what coverage.py's data record as docs/coverage.md defines: per "
          "package (`laya`, `laya_qual`, `laya_qual.suite`, `laya_qual.synth`, a file going to the longest of their "
          "folders it is in) the statements and branches executed of those there are, and `inProcessOnly` the same "
          "without what the `|subprocess` contexts ran; a line carrying the no-cover pragma followed by a dash and a "
          "reason is excluded (an `if` with its block and its branch) and listed with its reason, which goes on over "
          "the comment-only lines below it, and a pragma without the dash or the reason excludes nothing and is "
          "named by file and line; the tests counted are the node ids labelling the data, `shared:` fixtures not. "
          "`--laya-coverage FILE` signs the file's packages, data digest, seed, settings, test counts, tests red only "
          "under coverage and exclusions, and refuses, naming the file, one of another format or no JSON, a partial "
          "or unfinished run, one measured on other runtime or harness code, and one whose data file is missing or "
          "not of the sha256 it names (any byte changed); `laya-qual show` prints each package's covered/total with "
          "its percent rounded to one decimal (n/a of none)."),
    Claim("report.figures.traceability",
          "A report's `suite.traceability` is its map's figure as docs/report-format.md defines it: `fields` and "
          "`rules` count the `F-` and `R-` ids, an id covered only when its entry names tests and carries no gap; "
          "`mapDigest` is the sha256 of the map's canonical JSON (sorted keys, no whitespace, UTF-8, non-ASCII "
          "unescaped); `gaps` are the ids not covered, sorted; with no map given it is the figure of the map the "
          "harness ships, and a map of another format is refused naming the file. `laya-qual show` prints it as "
          "`fields and rules covered R of T` with each count, the gaps and the digest (nothing for a report "
          "without it); docs/claims.md's matrix lists each doc's ids with their tests or their gap; the map check "
          "names every id a doc has and the map lacks, every id of the map no doc has, and every entry whose doc "
          "is not the one the id is written in."),
    Claim("report.figures.kill-rate",
          "`--laya-kill-rate FILE` signs a sampled run's figure as the file's shipped-suite K of N, lower "
          "bound, parts, second figure and filed equivalents, and refuses, naming the file, a results file "
          "that does not separate the two figures, one where the suite killed a mutant filed equivalent, a "
          "partial or unfinished run, one measured on other runtime or harness code, and a file of another "
          "format."),
    Claim("report.verify.json",
          "`laya-qual verify --json` exits as the plain command does (0 authentic and acceptable, 3 "
          "authentic but short of --require-result or a --require-claim, 1 not authentic, 2 a claim no "
          "catalogue knows or a --require-result other than PASSED, WARNED and FAILED) and its object "
          "says the same: `verified`, `accepted`, the `result` and each "
          "claim's verdict as docs/report-format.md derives them from the outcomes, one shortfall per unmet "
          "requirement; a bundle is authentic only if every signature of every envelope verifies with the "
          "given key, one good signature beside a broken one included, whichever comes first."),
    Claim("report.harness.install-guard",
          "The isolated copy a mutation or coverage run builds shadows the install: a child started as the "
          "run starts it imports every package (laya, laya_qual, its suite and synth) from the copy, the guard "
          "accepts it, and refuses, naming the package, a copy one of whose packages resolves into the install "
          "(a link back to it)."),
    Claim("report.harness.inert",
          "The plugin loaded (`-p laya_qual`) into a pytest run that asks for no qualification, report or "
          "evidence changes nothing of it: the same outcomes and exit status as without it, no file of its own "
          "written (no report, evidence or durations), no line of output added, and the project's own `claim` marker stays its own."),
    Claim("report.harness.preflight",
          "Each mistake docs/report-format.md's \"Checks before the first test\" lists is refused before "
          "anything is collected, with exactly the documented line: an artifact or base directory (option or ini "
          "key) that is missing, a file, has no manifest.json, lists no head though given as a head, lacks a file "
          "its manifest lists or lists no base role, checked in that order, the missing files all named; a report "
          "path that is a directory or below a file; a --laya-claims pattern that selects no claim; a signing key "
          "with no report to sign, a figure or an earlier pass's evidence with no report to go into, two paths in "
          "a one-path ini key; pytest -p laya_qual exits 4 with that one ERROR line, and laya-qual run exits 2 "
          "with its Error line (run's own option names) before pytest starts, as it does for a --kill-rate or "
          "--coverage file that is missing and a --key without its matching KEY.pub. What the checks accept "
          "(an unreadable manifest, left to the suite; a report path in folders not made yet) configures, and "
          "nothing is made or changed on disk before the first test."),
    Claim("report.html.numbers",
          "`laya-qual show --html` and `--markdown` write every benchmark median, min, max and IQR as a "
          "duration in the one of ns, µs, ms and s that puts the number in [1, 1000) (min, then h, from "
          "1000 s), and every extraInfo number in the unit its name gives by docs/report-format.md's "
          "\"Numbers as shown\" (durations, bytes in B to TiB of 1024, rates with k, M, G, ratios with ×, "
          "counts), rounded to 3 significant digits so that it reads back to within half its last digit, "
          "with no exponent and no more than 4 digits; zero, negative numbers, NaN and infinities are "
          "written as documented; every median carries its min, max, IQR and rounds, each figure a report "
          "lacks saying `not recorded`; both begin with the headline figures (result, claims per verdict, "
          "code coverage, traceability, kill rate, benchmarks), each with what it measures."),
    Claim("report.show",
          "`laya-qual show` prints the signed report's result with its claims counted per verdict, "
          "one `not collected MODULE` line per module the run could not collect, the "
          "signature as verified (with --public-key) or NOT CHECKED, and every catalogued claim once with "
          "its verdict and its evidence counted per outcome (`no test ran` for none), failed claims first, "
          "then not evaluated, then passed; `--markdown` heads it with the result and folds the same table "
          "in `<details>`, failed verdicts in bold, then lists each failed claim with its failing tests "
          "and each module that did not collect (as `--html` does, in one paragraph); "
          "`--output FILE` writes what stdout would show, replacing FILE whole, and `--append` keeps FILE's "
          "bytes before it, leaving no temporary."),
    Claim("report.html.charts",
          "`laya-qual show --html` draws the signed report's own values: per head task, one point and "
          "one bar per non-empty bin of each `dev_cal` reliability diagram (before, after) at (mean top "
          "probability, accuracy), the bar spanning the bin from 0; each tested threshold of the "
          "certification path in the order tested at (threshold, risk bound), marked passed exactly when "
          "it acted within the target; the target risk a line across the plot and the certified "
          "threshold a line across it; per benchmark one bar from 0 for each arm figure docs/"
          "report-format.md names. Every mark sits where its values map through the frame its plot area "
          "records (within 0.01 px), the frame holds every value it draws, each value is exact in a "
          "`data-*` attribute, and no mark or label is drawn past its picture."),
    # --- release: the tools that combine and judge reports ------------------------
    Claim("release.compare.fail-on",
          "`laya-qual compare --fail-on` trips exactly as docs/report-format.md defines: for "
          "certification-coverage, risk-upper-bound, ece, nll, kill-rate, code-coverage and "
          "BENCHMARK:FIGURE, `-N` trips when NEW < "
          "OLD - N and `+N` when NEW > OLD + N (`N%` of |OLD|), exactly N is not more than N, a figure "
          "of OLD absent from NEW trips, one absent from OLD is not checked; `verdict` trips on a claim "
          "whose verdict moved down or that was removed, `uncertified` on a task certified in OLD and "
          "not in NEW, `temperature-bound` on a task at a bound of its temperature search in NEW and "
          "not in OLD."),
    Claim("release.compare.exit",
          "`laya-qual compare` on real signed bundles exits 0 when both verify and no --fail-on "
          "tripped, 3 when one tripped (each named on stderr), 1 when a bundle does not verify "
          "(tampered, or signed by another key), 2 for a malformed --fail-on or a bare `coverage:` that "
          "does not say which coverage (the error names both), with --json or without; "
          "with --json the status of every threshold says the same as the exit code, and the output "
          "is the documented object with sorted keys."),
    Claim("release.merge",
          "`laya-qual merge` of the shards' evidence of one run signs the report a single run "
          "gives: each claim failed if any of its tests failed (or errored, or xfailed) in any shard, "
          "else passed if one passed, else not evaluated; the counts tally those verdicts; the "
          "evidence is every shard's records; the invocation is shard 1's with the worst exit status, "
          "every shard's collection errors (any one makes the report FAILED), "
          "the earliest start and latest finish; the exit status is 0 PASSED, 1 FAILED, 3 WARNED."),
    Claim("release.merge.refusals",
          "`laya-qual merge` writes nothing and exits 4 naming the shard for a shard missing or "
          "given twice, a shard of another run (seed, subjects, selection, harness digests, durations "
          "file or environment profile differ), a test in two shards or in none, a shard that did not "
          "record each of its tests, and a file that is not shard evidence; an unusable --key is exit 2."),
    Claim("release.shards",
          "Shard assignment (`--laya-shard K/N`) is a partition: every selected test on exactly one "
          "shard in 1..N, the same for the same tests in any order, each pinned test (the benchmarks) "
          "on its shard, the rest placed longest first onto the least-loaded shard (ties: the lower "
          "shard, then the test id), a test never timed counted as the median of the timed ones (1 s "
          "without any), so it equals a reference greedy written from docs/report-format.md."),
    Claim("release.plan",
          "`laya-qual run --plan` prints one row per group (once per run, the base, each artifact "
          "by number and level, every head at once, the benchmarks) with its claims, tests and "
          "estimated seconds from the recorded durations (a test never timed counted as the median of "
          "the timed ones), and a total whose wall estimate is the suite pass's seconds over the "
          "workers plus the benchmark pass, as docs/report-format.md defines."),
)

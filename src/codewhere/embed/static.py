"""Static (model2vec-format) embeddings: a token-vector table, mean-pooled. No torch."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from codewhere.embed.base import length_sorted_batches, normalise_rows
from codewhere.errors import ModelError
from codewhere.types import ModelInfo

MAX_TOKENS = 2048  # a chunk is ~700 tokens by the 4-chars rule; wordpieces run longer
BATCH = 512
WORD_CACHE = 16_384  # words whose summed token rows are kept between calls: 16 MB at 256 dimensions
WORDS_PER_TEXT = 2_000  # distinct words tokenized together, as one text of words and spaces
# Printable ASCII text, as BERT's pre-tokenizer sees it: runs of letters and digits, and every
# other character on its own (all of ASCII's are punctuation to it); whitespace separates.
_PLAIN = re.compile(r"[\x20-\x7e\t\n\r]*")
_WORDS = re.compile(r"[a-z0-9]+|[^a-z0-9 \t\n\r]")


class StaticEmbedder:
    def __init__(
        self,
        model_id: str,
        tokenizer: Tokenizer,
        vectors: np.ndarray,
        weights: np.ndarray | None = None,
        mapping: np.ndarray | None = None,
        fingerprint: str | None = None,
    ) -> None:
        self._tokenizer = tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        # kept as stored (the default model: float16) until documents are embedded: a float32
        # copy of the table takes 12 ms, which a search that embeds one question never repays
        # (each row converts exactly, so both ways give the same vectors)
        self._stored = vectors
        self._table: np.ndarray | None = vectors if vectors.dtype == np.float32 else None
        self._weights = weights.astype(np.float32) if weights is not None else None
        self._mapping = mapping
        digest = fingerprint or hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest()
        self._info = ModelInfo(model_id, int(vectors.shape[1]), digest)
        self._words_lock = threading.Lock()  # indexes in one process share the model (load_folder)

    @property
    def info(self) -> ModelInfo:
        return self._info

    @cached_property
    def _words(self) -> _WordSums | None:
        """Read from the tokenizer's configuration (30 ms) when documents are first embedded,
        not when the model loads: a search embeds only its query."""
        return _WordSums.for_tokenizer(self._tokenizer, self._info.dim)

    def __getstate__(self) -> dict[str, object]:
        """Pickled for the worker processes without the float32 copy, which each makes if it
        needs it, and without the words seen, which each worker learns from its own files."""
        state = dict(self.__dict__)
        if self._stored.dtype != np.float32:
            state["_table"] = None
        del state["_words_lock"]
        if isinstance(words := state.get("_words"), _WordSums):
            state["_words"] = words.emptied()
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._words_lock = threading.Lock()

    def _float_table(self, rows: int) -> np.ndarray:
        if self._table is None and rows > 1:
            self._table = self._stored.astype(np.float32)
        return self._stored if self._table is None else self._table

    def _token_rows(self, ids: np.ndarray, table: np.ndarray) -> np.ndarray:
        rows = table[self._mapping[ids] if self._mapping is not None else ids].astype(np.float32, copy=False)
        return rows * self._weights[ids][:, None] if self._weights is not None else rows

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        """Each text tokenized and its first MAX_TOKENS token rows averaged."""
        table = self._float_table(len(texts))
        out = np.zeros((len(texts), self._info.dim), dtype=np.float32)
        for batch in length_sorted_batches(texts, BATCH):
            encodings = self._tokenizer.encode_batch_fast([texts[i] for i in batch], add_special_tokens=False)
            for row, encoding in zip(batch, encodings, strict=True):
                ids = np.asarray(encoding.ids[:MAX_TOKENS], dtype=np.int64)
                if len(ids):
                    out[row] = self._token_rows(ids, table).mean(axis=0)
        return normalise_rows(out)

    def _encode_by_word(self, texts: Sequence[str], words: _WordSums) -> np.ndarray:
        """The same averages, made from each text's words and how often each occurs: a word's
        token rows are summed once, when first seen, not at every occurrence. Code repeats its
        words (keywords, names, operators): gson's 1.8 M characters of chunk text have 6,800
        distinct words, and the tokenizer, not the table, was the time. Texts the word split
        does not fit (other than printable ASCII, holding a special token like `[CLS]`, or over
        MAX_TOKENS, which `_encode` cuts where their tokens run out) take `_encode`."""
        counted = [words.count(text) for text in texts]
        out = np.zeros((len(texts), self._info.dim), dtype=np.float32)
        exact: list[int] = []
        with self._words_lock:
            wanted: dict[str, None] = {}
            for counts in counted:
                if counts is not None:
                    wanted.update(dict.fromkeys(counts))
            new = words.make_room(wanted)
            if new:
                ids, starts = words.tokenize(self._tokenizer, new)
                lengths = np.diff(starts, append=len(ids))
                words.add(new, _sum_runs(self._token_rows(ids, self._float_table(len(ids))), starts, lengths), lengths)
            for row, counts in enumerate(counted):
                if counts is None:
                    exact.append(row)
                    continue
                at = [words.row_of[word] for word in counts]
                times = np.fromiter(counts.values(), np.float32, len(at))
                tokens = int(times @ words.lengths[at])
                if tokens > MAX_TOKENS:
                    exact.append(row)
                elif tokens:
                    out[row] = (times @ words.sums[at]) / tokens
        if exact:
            out[exact] = self._encode([texts[i] for i in exact])
        return normalise_rows(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts) if self._words is None else self._encode_by_word(texts, self._words)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


class _WordSums:
    """For a lowercasing BERT WordPiece tokenizer: the words seen, each with the sum of its token
    rows and its number of tokens. Such a tokenizer gives a text the tokens of its words, one word
    after the other, so a text's token rows sum to its words' sums times their counts."""

    def __init__(self, dim: int, continues: np.ndarray, special: tuple[str, ...]) -> None:
        self.dim = dim
        self.continues = continues  # per token id: a word's later piece ("##ing"), not its first
        self.special = special  # tokens matched in the raw text before the split into words (lowercased)
        self.row_of: dict[str, int] = {}
        self.sums = np.zeros((0, dim), np.float32)
        self.lengths = np.zeros(0, np.int64)

    @classmethod
    def for_tokenizer(cls, tokenizer: Tokenizer, dim: int) -> _WordSums | None:
        """None unless the tokenizer lowercases, splits at whitespace and punctuation as BERT
        does, and cuts words into WordPiece tokens: then the word split of `count` is its own."""
        config = json.loads(tokenizer.to_str())
        normalizer = config.get("normalizer") or {}
        model = config.get("model") or {}
        lowercases = (normalizer.get("type") == "BertNormalizer" and normalizer.get("lowercase")) or normalizer.get("type") == "Lowercase"
        if not (lowercases and (config.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
                and model.get("type") == "WordPiece" and model.get("continuing_subword_prefix")):
            return None
        prefix = model["continuing_subword_prefix"]
        vocabulary = tokenizer.get_vocab(with_added_tokens=True)
        continues = np.zeros(max(vocabulary.values()) + 1, bool)
        continues[[i for token, i in vocabulary.items() if token.startswith(prefix)]] = True
        special = tuple(token["content"].lower() for token in config.get("added_tokens") or () if token.get("content"))
        return cls(dim, continues, special)

    def emptied(self) -> _WordSums:
        return _WordSums(self.dim, self.continues, self.special)

    def count(self, text: str) -> Counter[str] | None:
        """The text's words and how often each occurs; None where the split may not be the
        tokenizer's (a character other than printable ASCII, a special token in the text)."""
        if not _PLAIN.fullmatch(text):
            return None
        lowered = text.lower()
        if any(token in lowered for token in self.special):
            return None
        return Counter(_WORDS.findall(lowered))

    def make_room(self, wanted: dict[str, None]) -> list[str]:
        """The words of `wanted` not known yet, after forgetting every word if they would
        overflow the cache."""
        new = [word for word in wanted if word not in self.row_of]
        if len(self.row_of) + len(new) > WORD_CACHE:
            self.row_of = {}
            new = list(wanted)
        return new

    def tokenize(self, tokenizer: Tokenizer, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The token ids of `words`, one after the other, and where each word's tokens start.
        Words go to the tokenizer joined by spaces, a few thousand to a text (a text per word
        costs the tokenizer about 14 µs each); every word has a first token (at worst
        [UNK]), so the first tokens mark where each word starts."""
        texts = [" ".join(words[i:i + WORDS_PER_TEXT]) for i in range(0, len(words), WORDS_PER_TEXT)]
        encodings = tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        ids = np.concatenate([np.asarray(encoding.ids, np.int64) for encoding in encodings])
        starts = np.flatnonzero(~self.continues[ids])
        if len(starts) != len(words):  # not the tokenizer for_tokenizer took it for: each word alone
            single = tokenizer.encode_batch_fast(words, add_special_tokens=False)
            ids = np.concatenate([np.asarray(encoding.ids, np.int64) for encoding in single])
            starts = np.cumsum([0] + [len(encoding.ids) for encoding in single[:-1]])
        return ids, starts

    def add(self, words: list[str], sums: np.ndarray, lengths: np.ndarray) -> None:
        start = len(self.row_of)
        end = start + len(words)
        if end > len(self.sums):  # grown by doubling: a worker embeds file by file, and a copy of
            capacity = max(end, 2 * len(self.sums), 1_024)  # the whole cache per call was O(cache)
            self.sums = _grown(self.sums, start, capacity)
            self.lengths = _grown(self.lengths, start, capacity)
        self.row_of.update((word, start + i) for i, word in enumerate(words))
        self.sums[start:end] = sums
        self.lengths[start:end] = lengths


def _grown(array: np.ndarray, kept: int, capacity: int) -> np.ndarray:
    grown = np.empty((capacity, *array.shape[1:]), array.dtype)
    grown[:kept] = array[:kept]
    return grown


def _sum_runs(rows: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The sum of each run of rows (`lengths[i]` rows from `starts[i]`), the runs of one length
    at a time: 4x faster than `np.add.reduceat` over rows, since most words are 1-3 tokens."""
    out = np.empty((len(starts), rows.shape[1]), np.float32)
    for length in np.unique(lengths):
        runs = np.flatnonzero(lengths == length)
        if length == 0:  # a word its tokenizer drops entirely
            out[runs] = 0
            continue
        total = rows[starts[runs]]
        for offset in range(1, int(length)):
            total += rows[starts[runs] + offset]
        out[runs] = total
    return out


_MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")
_loaded: dict[tuple[str, str], tuple[tuple[int, ...], StaticEmbedder]] = {}  # one model a folder: the latest read
_loading = threading.Lock()


def load_folder(folder: Path, model_id: str) -> StaticEmbedder:
    """A model2vec folder's model, read once per process while its files stay as they are: a
    process that opens several indexes (an MCP server, an eval, a benchmark) reads the tokenizer
    (13 ms) and the table once, as semble's loader does. Its state is fixed once made (the float32
    table is made at most once), so indexes share it."""
    key, stamps = (str(folder), model_id), _file_stamps(folder)
    with _loading:
        held = _loaded.get(key)
        if held is None or held[0] != stamps:
            held = _loaded[key] = (stamps, _read_folder(folder, model_id))
    return held[1]


def _file_stamps(folder: Path) -> tuple[int, ...]:
    stamps: list[int] = []
    for name in _MODEL_FILES:
        try:
            info = (folder / name).stat()
            stamps += [info.st_size, info.st_mtime_ns, info.st_ino]
        except OSError:
            stamps += [-1, -1, -1]
    return tuple(stamps)


def _read_folder(folder: Path, model_id: str) -> StaticEmbedder:
    """Read a model2vec folder directly: 4x faster than `StaticModel.from_pretrained`, which matters
    because every CLI search process loads the model before it can embed the query."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(folder / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
    except (OSError, ValueError, Exception) as exc:  # safetensors and tokenizers raise their own types
        raise ModelError(
            f"{folder} is not a readable model2vec model ({exc})", "pass a folder saved by model2vec, or a Hugging Face id"
        ) from exc
    if "embeddings" not in tensors:
        raise ModelError(f"{folder}/model.safetensors has no 'embeddings' tensor", "pass a folder saved by model2vec")
    return StaticEmbedder(
        model_id, tokenizer, tensors["embeddings"], tensors.get("weights"), tensors.get("mapping"),
        fingerprint=config.get("source_fingerprint") and f"{config.get('recipe')}:{config['source_fingerprint']}",
    )


def load_hub(name: str) -> StaticEmbedder:
    """Any model2vec model by Hugging Face id, through model2vec's own loader (needs a network
    the first time; later from the Hugging Face cache)."""
    try:
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(name, force_download=False)
    except Exception as exc:  # network, auth, missing repo: all end the same way for the user
        raise ModelError(
            f"could not load the model2vec model {name!r} ({type(exc).__name__}: {str(exc)[:200]})",
            "check the name and the network, or pass a local model folder with --model",
        ) from exc
    return StaticEmbedder(name, model.tokenizer, np.asarray(model.embedding), model.weights, model.token_mapping)

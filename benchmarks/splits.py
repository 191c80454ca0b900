"""Which of semble's benchmark repositories fit the ranking constants and which are reported.

A constant is chosen by `fit_signals.py` on DEV only; `semble_bench.py --split reported` reports
on REPORTED. The first eight DEV and the first ten REPORTED repositories were the split of the
first ranking work; the rest were added once every pinned revision could be fetched (all but
httpx, starlette, axios, jackson-databind, guzzle, messagepack-csharp, nlohmann-json, circe,
http4s, snapkit, redis, bash-it and mini.nvim, whose snapshots here lack the pinned commit, and
zig, too large to fetch). They were split before any was run: within each language, sorted by
name, the first went to DEV, the second to REPORTED, and so on.
"""

DEV = (
    "cobra", "sinatra", "fastapi", "model2vec", "rack", "commons-lang", "tokio", "dapper",
    "bats-core", "curl", "abseil-cpp", "newtonsoft-json", "ecto", "plug", "aeson", "xmonad", "redux",
    "exposed", "ktor", "lazy.nvim", "laravel-framework", "aiohttp", "rails", "cats", "alamofire", "trpc",
    "zig-clap",
)

REPORTED = (
    "flask", "requests", "click", "express", "zod", "gin", "chi", "serde", "axum", "gson",
    "nvm", "libuv", "fmtlib", "phoenix", "pandoc", "kotlinx-coroutines", "telescope.nvim", "monolog",
    "pydantic", "vapor", "vitest", "zls",
)

SPLITS = {"dev": DEV, "reported": REPORTED}

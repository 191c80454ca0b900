"""The code corpus the static model is trained on: pinned packages from the registries this
project may reach (PyPI sdists, npm tarballs, Debian binary and source packages), none of them a
repository of semble's benchmark or of the function-level set (`EXCLUDED`, checked by corpus.py).

Each entry: (source, name, version, languages wanted from it). The sha256 of every download is
recorded in corpus-lock.json by `corpus.py --record` and checked on every later run.
"""

from __future__ import annotations

from typing import NamedTuple


class Package(NamedTuple):
    source: str  # pypi | npm | deb (a binary package) | debsrc (a source package)
    name: str
    version: str
    languages: tuple[str, ...]


PY = ("python", "cython", "c")
PACKAGES: tuple[Package, ...] = (
    # Python (and the C and Cython of the extensions that ship them)
    Package("pypi", "rich", "13.9.4", PY),
    Package("pypi", "attrs", "24.2.0", PY),
    Package("pypi", "tornado", "6.4.2", PY),
    Package("pypi", "marshmallow", "3.23.1", PY),
    Package("pypi", "sqlalchemy", "2.0.36", PY),
    Package("pypi", "jinja2", "3.1.4", PY),
    Package("pypi", "pytest", "8.3.4", PY),
    Package("pypi", "networkx", "3.4.2", PY),
    Package("pypi", "pyyaml", "6.0.2", PY),
    # JavaScript
    Package("npm", "lodash", "4.17.21", ("javascript",)),
    Package("npm", "moment", "2.30.1", ("javascript",)),
    Package("npm", "commander", "12.1.0", ("javascript", "typescript")),
    Package("npm", "yargs", "17.7.2", ("javascript",)),
    Package("npm", "async", "3.2.6", ("javascript",)),
    Package("npm", "bluebird", "3.7.2", ("javascript",)),
    Package("npm", "ramda", "0.30.1", ("javascript",)),
    # TypeScript (packages that ship their sources)
    Package("npm", "rxjs", "7.8.1", ("typescript",)),
    Package("npm", "fp-ts", "2.16.9", ("typescript",)),
    Package("npm", "immer", "10.1.1", ("typescript",)),
    Package("npm", "mobx", "6.13.5", ("typescript",)),
    Package("npm", "@tanstack/query-core", "5.62.3", ("typescript",)),
    # Swift and Kotlin inside React Native / Capacitor modules
    Package("npm", "expo-modules-core", "2.1.1", ("swift", "kotlin")),
    Package("npm", "@capacitor/ios", "6.2.0", ("swift",)),
    Package("npm", "@capacitor/android", "6.2.0", ("java",)),
    # Go (Debian's -dev packages carry the sources)
    Package("deb", "golang-github-stretchr-testify-dev", "1.8.1-1", ("go",)),
    Package("deb", "golang-github-sirupsen-logrus-dev", "1.9.0-1", ("go",)),
    Package("deb", "golang-github-gorilla-mux-dev", "1.8.0-1", ("go",)),
    Package("deb", "golang-github-spf13-viper-dev", "1.10.1-1", ("go",)),
    Package("deb", "golang-github-google-go-cmp-dev", "0.5.9-1", ("go",)),
    Package("deb", "golang-github-prometheus-client-golang-dev", "1.14.0-3", ("go",)),
    # Rust (Debian's librust-*-dev packages carry the crates)
    Package("deb", "librust-regex-dev", "1.7.1-1", ("rust",)),
    Package("deb", "librust-regex-syntax-dev", "0.6.27-1", ("rust",)),
    Package("deb", "librust-anyhow-dev", "1.0.69-1", ("rust",)),
    Package("deb", "librust-itertools-dev", "0.10.3-1", ("rust",)),
    Package("deb", "librust-rand-dev", "0.8.5-1", ("rust",)),
    Package("deb", "librust-hyper-dev", "0.14.19-1", ("rust",)),
    Package("deb", "librust-clap-dev", "4.0.32-1", ("rust",)),
    Package("deb", "librust-nom-dev", "7.1.1-1", ("rust",)),
    # Ruby
    Package("deb", "ruby-thor", "1.2.1-2", ("ruby",)),
    Package("deb", "ruby-i18n", "1.10.0-2", ("ruby",)),
    Package("deb", "ruby-faraday", "1.1.0-7", ("ruby",)),
    Package("deb", "ruby-rspec-core", "3.12.0c0e1m1s0-1", ("ruby",)),
    Package("deb", "ruby-addressable", "2.8.1-1", ("ruby",)),
    Package("deb", "ruby-kramdown", "2.4.0-2", ("ruby",)),
    # PHP
    Package("deb", "php-twig", "3.5.1-1+deb12u3", ("php",)),
    Package("deb", "php-league-commonmark", "2.3.9-1+deb12u1", ("php",)),
    Package("deb", "php-symfony-console", "5.4.53+dfsg-0+deb12u1", ("php",)),
    # Lua
    Package("deb", "lua-penlight", "1.13.1-3", ("lua",)),
    # Java
    Package("debsrc", "commons-io", "2.11.0-2", ("java",)),
    Package("debsrc", "jsoup", "1.15.3-1", ("java",)),
    Package("debsrc", "junit4", "4.13.2-3", ("java",)),
    Package("debsrc", "guava-libraries", "31.1-1", ("java",)),
    # Kotlin, Scala, C#, Elixir, Haskell, Bash
    Package("debsrc", "kotlin", "1.3.31+ds1-1", ("kotlin",)),
    Package("debsrc", "scala", "2.11.12-5", ("scala",)),
    Package("debsrc", "nunit", "2.6.4+dfsg-1.1", ("csharp",)),
    Package("debsrc", "elixir-lang", "1.14.0.dfsg-2", ("elixir",)),
    Package("debsrc", "haskell-megaparsec", "9.2.2-1", ("haskell",)),
    Package("debsrc", "haskell-optparse-applicative", "0.16.1.0-1", ("haskell",)),
    Package("debsrc", "haskell-conduit", "1.3.4.3-1", ("haskell",)),
    Package("debsrc", "bash-completion", "1:2.11-6", ("bash",)),
    # C and C++
    Package("debsrc", "zlib", "1:1.2.13.dfsg-1", ("c",)),
    Package("debsrc", "jansson", "2.14-2", ("c",)),
    Package("debsrc", "libyaml", "0.2.5-1", ("c",)),
    Package("debsrc", "tinyxml2", "9.0.0+dfsg-3.1", ("cpp",)),
    Package("debsrc", "pugixml", "1.13-0.2", ("cpp",)),
    Package("debsrc", "yaml-cpp", "0.7.0+dfsg-8", ("cpp",)),
    Package("debsrc", "catch2", "2.13.10-1", ("cpp",)),
)

# Every repository of semble's benchmark (shared/semble-bench/repos.json) and of the
# function-level set, by the names a registry might give them: none may be in the corpus.
EXCLUDED = frozenset({
    "flask", "requests", "click", "express", "zod", "gin", "chi", "serde", "axum", "gson", "nvm", "libuv",
    "fmt", "fmtlib", "phoenix", "pandoc", "kotlinx-coroutines", "telescope.nvim", "monolog", "pydantic",
    "vapor", "vitest", "zls", "cobra", "sinatra", "fastapi", "model2vec", "rack", "commons-lang", "commons-lang3",
    "tokio", "dapper", "bats-core", "curl", "abseil-cpp", "abseil", "newtonsoft-json", "newtonsoft.json", "ecto",
    "plug", "aeson", "xmonad", "redux", "exposed", "ktor", "lazy.nvim", "laravel-framework", "laravel", "aiohttp",
    "rails", "cats", "alamofire", "trpc", "zig-clap", "httpx", "starlette", "axios", "jackson-databind", "guzzle",
    "messagepack-csharp", "nlohmann-json", "circe", "http4s", "snapkit", "redis", "bash-it", "mini.nvim", "zig",
})

// Conformance of docs/protocol.md ("redlock wire protocol 1") with the library: every
// script the library has is shown there byte for byte under its SHA-1, and the key,
// channel and record names the library builds are the document's examples. The
// document is read from REDLOCK_PROTOCOL_DOC; the library's sources (to find every
// script constant, also one added later) from REDLOCK_SOURCE_DIR.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "primitives/election_scripts.h"
#include "primitives/leader_view.h"
#include "primitives/permits.h"
#include "protocol/resp.h"
#include "protocol/scripts.h"
#include "pure/keys.h"
#include "pure/sha1.h"
#include "pure/token.h"
#include "redlock/election.h"
#include "redlock/fencing.h"

namespace redlock::detail {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct doc_script {
  std::string body;
  std::string sha1;  // as the document states it
  int line = 0;      // of the opening fence, 1-based
};

// Every ```lua id=NAME block of the document, with the "SHA-1: `...`" line after it.
// A malformed block (no closing fence, no SHA-1 line, an id twice) is a test failure.
std::map<std::string, doc_script> doc_scripts(const std::string& doc) {
  std::map<std::string, doc_script> out;
  const auto lines = lines_of(doc);
  const std::string open = "```lua id=";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```lua", 0) != 0) continue;
    if (lines[i].rfind(open, 0) != 0) {
      ADD_FAILURE() << "protocol.md:" << i + 1 << ": a lua block without an id: " << lines[i];
      continue;
    }
    const std::string id = lines[i].substr(open.size());
    doc_script s;
    s.line = static_cast<int>(i + 1);
    std::size_t j = i + 1;
    for (; j < lines.size() && lines[j] != "```"; ++j) s.body += lines[j] + "\n";
    if (j == lines.size()) {
      ADD_FAILURE() << "protocol.md:" << i + 1 << ": block " << id << " is not closed";
      break;
    }
    std::size_t k = j + 1;
    while (k < lines.size() && lines[k].empty()) ++k;
    const std::string prefix = "SHA-1: `";
    if (k == lines.size() || lines[k].rfind(prefix, 0) != 0 || lines[k].size() != prefix.size() + 41 ||
        lines[k].back() != '`') {
      ADD_FAILURE() << "protocol.md:" << i + 1 << ": block " << id
                    << " is not followed by a line SHA-1: `<40 hex>`";
    } else {
      s.sha1 = lines[k].substr(prefix.size(), 40);
    }
    if (!out.emplace(id, s).second)
      ADD_FAILURE() << "protocol.md:" << i + 1 << ": block id " << id << " twice";
    i = j;
  }
  return out;
}

// --- the library's script constants, found in its sources ---

// The bytes of one C++ string literal's contents (between the quotes). Only the
// escapes the sources use; another one is reported in `error`.
std::string decode_literal(const std::string& s, std::string& error) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) break;
    switch (s[i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case '\\':
        out += '\\';
        break;
      case '"':
        out += '"';
        break;
      case '\'':
        out += '\'';
        break;
      default:
        error = std::string("unsupported escape \\") + s[i];
    }
  }
  return out;
}

// Adjacent string literals and identifiers (macros of `macros`) from `at` up to the
// first ';' (or end of a macro), concatenated. Advances `at`.
std::string concatenate(const std::string& src, std::size_t& at,
                        const std::map<std::string, std::string>& macros, std::string& error,
                        bool macro_body) {
  std::string out;
  while (at < src.size()) {
    const char c = src[at];
    if (c == ';' && !macro_body) {
      ++at;
      break;
    }
    if (macro_body && c == '\n' && (at == 0 || src[at - 1] != '\\')) break;
    if (c == '"') {
      std::size_t end = at + 1;
      while (end < src.size() && src[end] != '"') end += src[end] == '\\' ? 2 : 1;
      out += decode_literal(src.substr(at + 1, end - at - 1), error);
      at = end + 1;
    } else if (c == '/' && at + 1 < src.size() && src[at + 1] == '/') {
      at = src.find('\n', at);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t end = at;
      while (end < src.size() && (std::isalnum(static_cast<unsigned char>(src[end])) || src[end] == '_'))
        ++end;
      const std::string ident = src.substr(at, end - at);
      auto it = macros.find(ident);
      if (it == macros.end()) {
        error = "unknown identifier " + ident + " in a string constant";
      } else {
        out += it->second;
      }
      at = end;
    } else {
      ++at;
    }
  }
  return out;
}

struct source_script {
  std::string file, name, body;
};

// Every `const char NAME[] = ...;` of `src` whose value calls into Redis's Lua API
// (redis.call, redis.pcall), expanding string macros defined in the same file.
std::vector<source_script> script_constants(const std::string& file, const std::string& src) {
  std::map<std::string, std::string> macros;
  for (std::size_t at = src.find("#define "); at != std::string::npos; at = src.find("#define ", at)) {
    at += 8;
    std::size_t end = at;
    while (end < src.size() && (std::isalnum(static_cast<unsigned char>(src[end])) || src[end] == '_')) ++end;
    const std::string name = src.substr(at, end - at);
    std::string error;
    std::size_t body_at = end;
    const std::string body = concatenate(src, body_at, macros, error, /*macro_body=*/true);
    if (error.empty() && !body.empty()) macros[name] = body;
    at = body_at;
  }
  std::vector<source_script> out;
  const std::string decl = "const char ";
  for (std::size_t at = src.find(decl); at != std::string::npos; at = src.find(decl, at)) {
    at += decl.size();
    std::size_t end = at;
    while (end < src.size() && (std::isalnum(static_cast<unsigned char>(src[end])) || src[end] == '_')) ++end;
    if (end == at || src.compare(end, 2, "[]") != 0) continue;
    const std::string name = src.substr(at, end - at);
    std::size_t eq = src.find_first_not_of(" \t", end + 2);
    if (eq == std::string::npos || src[eq] != '=') continue;
    std::size_t value_at = eq + 1;
    std::string error;
    const std::string body = concatenate(src, value_at, macros, error, /*macro_body=*/false);
    at = value_at;
    const bool lua =
        body.find("redis.call(") != std::string::npos || body.find("redis.pcall(") != std::string::npos;
    if (!error.empty() && lua) ADD_FAILURE() << file << ": " << name << ": " << error;
    if (lua) out.push_back({file, name, body});
  }
  return out;
}

std::vector<source_script> library_script_constants() {
  namespace fs = std::filesystem;
  std::vector<source_script> out;
  const fs::path root(REDLOCK_SOURCE_DIR);
  for (const char* dir : {"lib", "include"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      for (auto& s : script_constants(fs::relative(e.path(), root).string(), read_all(e.path().string()))) {
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

// The document's id of each constant the library sends (or, for fencing.h, publishes).
struct named {
  const char* doc_id;
  const char* body;
};
const std::vector<named>& library_scripts() {
  static const std::vector<named> all = {
      {"acquire", kAcquire},
      {"acquire_fenced", kAcquireFenced},
      {"fence_commit", kFenceCommit},
      {"extend", kExtend},
      {"release", kRelease},
      {"release_quiet", kReleaseQuiet},
      {"inspect", kInspect},
      {"acquire_many", kAcquireMany},
      {"extend_many", kExtendMany},
      {"release_many", kReleaseMany},
      {"release_many_quiet", kReleaseManyQuiet},
      {"election_publish", kElectionPublish},
      {"election_observe", kElectionObserve},
      {"fenced_write", fenced_write_script},
      {"fenced_read", fenced_read_script},
      {"fenced_compare_and_set", fenced_compare_and_set_script},
  };
  return all;
}

class ProtocolDoc : public ::testing::Test {
 protected:
  void SetUp() override {
    doc_ = read_all(REDLOCK_PROTOCOL_DOC);
    ASSERT_FALSE(doc_.empty()) << "cannot read " << REDLOCK_PROTOCOL_DOC;
    scripts_ = doc_scripts(doc_);
  }
  std::string doc_;
  std::map<std::string, doc_script> scripts_;
};

TEST_F(ProtocolDoc, names_its_version) {
  EXPECT_EQ(doc_.rfind("# redlock wire protocol 1\n", 0), 0u)
      << "the first line names the protocol's version";
}

TEST_F(ProtocolDoc, every_library_script_is_shown_byte_for_byte_with_its_sha1) {
  std::set<std::string> ids;
  for (const named& n : library_scripts()) {
    SCOPED_TRACE(n.doc_id);
    ids.insert(n.doc_id);
    auto it = scripts_.find(n.doc_id);
    ASSERT_NE(it, scripts_.end()) << "docs/protocol.md has no ```lua id=" << n.doc_id << " block";
    EXPECT_EQ(it->second.body, n.body)
        << "protocol.md:" << it->second.line << " differs from the library's script";
    EXPECT_EQ(it->second.sha1, sha1_hex(n.body)) << "protocol.md:" << it->second.line << ": the stated SHA-1";
    EXPECT_EQ(sha1_hex(it->second.body), it->second.sha1)
        << "protocol.md:" << it->second.line << ": the SHA-1 of the block as written";
  }
  for (const auto& [id, s] : scripts_) {
    EXPECT_TRUE(ids.count(id)) << "protocol.md:" << s.line << ": block " << id
                               << " is no script of the library";
  }
}

TEST_F(ProtocolDoc, the_shas_the_client_sends_with_evalsha_are_the_documented_ones) {
  for (unsigned i = 0; i < static_cast<unsigned>(script_id::count); ++i) {
    const auto id = static_cast<script_id>(i);
    const script& s = get_script(id);
    if (id == script_id::ping) continue;  // a plain PING
    bool found = false;
    for (const auto& [name, d] : scripts_) found = found || (d.body == s.body && d.sha1 == s.sha());
    EXPECT_TRUE(found) << "script_id " << i << " (sha " << s.sha() << ") is not in docs/protocol.md";
  }
}

// The requests as the document states them: EVALSHA sha numkeys KEYS... ARGV..., the
// same with EVAL and the body, and the plain acquire SET key token NX PX ttl GET, with
// the clock sample's TIME pipelined behind it.
TEST_F(ProtocolDoc, requests_are_encoded_as_documented) {
  auto resp = [](std::initializer_list<std::string_view> argv) {
    std::string out;
    append_resp(out, argv);
    return out;
  };
  const std::string key = "orders:4711", tok = "0123456789abcdef0123456789abcdef";
  EXPECT_NE(doc_.find("`SET key token NX PX ttl GET`"), std::string::npos);
  EXPECT_NE(doc_.find("`EVALSHA sha1 numkeys KEYS... ARGV...`"), std::string::npos);

  command set_cmd;
  set_cmd.script = script_id::acquire_set;
  set_cmd.key = key;
  set_cmd.arg1 = tok;
  set_cmd.arg2 = "30000";
  const wire set_wire(set_cmd);
  EXPECT_EQ(set_wire.sha_form(), resp({"SET", key, tok, "NX", "PX", "30000", "GET"}));
  EXPECT_EQ(set_wire.timed_form(), resp({"SET", key, tok, "NX", "PX", "30000", "GET"}) + resp({"TIME"}));
  // The fallback for servers before 7.0: the acquire script, as EVAL.
  EXPECT_EQ(set_wire.eval_form(), resp({"EVAL", kAcquire, "1", key, tok, "30000"}));

  command ext;
  ext.script = script_id::extend;
  ext.key = key;
  ext.arg1 = tok;
  ext.arg2 = "30000";
  const wire ext_wire(ext);
  EXPECT_EQ(ext_wire.sha_form(), resp({"EVALSHA", sha1_hex(kExtend), "1", key, tok, "30000"}));
  EXPECT_EQ(ext_wire.eval_form(), resp({"EVAL", kExtend, "1", key, tok, "30000"}));

  command rel;
  rel.script = script_id::release;
  rel.key = key;
  rel.arg1 = tok;
  EXPECT_EQ(wire(rel).sha_form(), resp({"EVALSHA", sha1_hex(kRelease), "1", key, tok}));

  command fenced;
  fenced.script = script_id::acquire_fenced;
  fenced.key = key;
  fenced.key2 = fence_key(key);
  fenced.arg1 = tok;
  fenced.arg2 = "30000";
  EXPECT_EQ(wire(fenced).sha_form(),
            resp({"EVALSHA", sha1_hex(kAcquireFenced), "2", key, "orders:4711:fence", tok, "30000"}));

  command commit = fenced;
  commit.script = script_id::fence_commit;
  commit.arg2 = "8";
  EXPECT_EQ(wire(commit).sha_form(),
            resp({"EVALSHA", sha1_hex(kFenceCommit), "2", key, "orders:4711:fence", tok, "8"}));

  command many;
  many.script = script_id::acquire_many;
  many.keys = {"a", "b", "c"};
  many.arg1 = tok;
  many.arg2 = "30000";
  EXPECT_EQ(wire(many).sha_form(),
            resp({"EVALSHA", sha1_hex(kAcquireMany), "3", "a", "b", "c", tok, "30000"}));

  command insp;
  insp.script = script_id::inspect;
  insp.key = key;
  EXPECT_EQ(wire(insp).sha_form(), resp({"EVALSHA", sha1_hex(kInspect), "1", key}));
}

// A script constant added anywhere in lib/ or include/ without its block in the
// document fails here, whatever it is called.
TEST_F(ProtocolDoc, every_script_constant_in_the_sources_is_documented) {
  const auto found = library_script_constants();
  // The scan itself must see what is known to be there (else it proves nothing).
  ASSERT_GE(found.size(), library_scripts().size());
  std::set<std::string> documented;
  for (const auto& [id, s] : scripts_) documented.insert(s.body);
  for (const source_script& s : found) {
    EXPECT_TRUE(documented.count(s.body))
        << s.file << ": " << s.name << " is a Lua script that docs/protocol.md does not show (sha "
        << sha1_hex(s.body) << ")";
  }
  std::set<std::string> bodies;
  for (const source_script& s : found) bodies.insert(s.body);
  for (const named& n : library_scripts())
    EXPECT_TRUE(bodies.count(n.body)) << n.doc_id << " not found by the scan";
}

// The scanner, on a made-up source: macros, adjacent literals, escapes, comments.
TEST(ProtocolDocScanner, reads_constants_as_the_compiler_does) {
  const std::string src =
      "#define PART_ \\\n  \"local a = 1\\n\" \\\n  \"local b = 2\\n\"\n"
      "inline constexpr const char kOne[] =\n    \"return redis.call('GET', KEYS[1])\\n\";\n"
      "constexpr const char kTwo[] = \"x\" PART_  // a comment\n    \"redis.pcall('PING')\\n\";\n"
      "const char kNotLua[] = \"plain\";\n"
      "const char* pointer = \"redis.call(\";\n";
  const auto found = script_constants("made-up.h", src);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].name, "kOne");
  EXPECT_EQ(found[0].body, "return redis.call('GET', KEYS[1])\n");
  EXPECT_EQ(found[1].name, "kTwo");
  EXPECT_EQ(found[1].body, "xlocal a = 1\nlocal b = 2\nredis.pcall('PING')\n");
}

// --- key, channel and record names ---

// The ```text id=<block> block (key-examples, cluster-key-examples): `name = "value"` or
// `name = number` lines.
std::vector<std::pair<std::string, std::string>> key_examples(const std::string& doc,
                                                              const std::string& block = "key-examples") {
  std::vector<std::pair<std::string, std::string>> out;
  const auto lines = lines_of(doc);
  std::size_t i = 0;
  while (i < lines.size() && lines[i] != "```text id=" + block) ++i;
  for (++i; i < lines.size() && lines[i] != "```"; ++i) {
    const auto eq = lines[i].find(" = ");
    if (eq == std::string::npos) {
      ADD_FAILURE() << "key-examples: not `name = value`: " << lines[i];
      continue;
    }
    std::string value = lines[i].substr(eq + 3);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    out.emplace_back(lines[i].substr(0, eq), value);
  }
  return out;
}

TEST_F(ProtocolDoc, key_names_are_the_documented_examples) {
  const auto examples = key_examples(doc_);
  ASSERT_FALSE(examples.empty()) << "docs/protocol.md has no ```text id=key-examples block";
  std::map<std::string, std::string> v;
  std::set<std::string> checked;
  const std::set<std::string> inputs = {"key_prefix", "resource", "semaphore", "permit",
                                        "role",       "term",     "token",     "identity"};
  for (const auto& [name, value] : examples) {
    SCOPED_TRACE(name + " = " + value);
    if (inputs.count(name)) {
      v[name] = value;
      continue;
    }
    std::string built;
    if (name == "lock_key") {
      built = lock_key(v.at("key_prefix"), v.at("resource"));
    } else if (name == "fence_key") {
      built = fence_key(lock_key(v.at("key_prefix"), v.at("resource")));
    } else if (name == "release_channel") {
      built = release_channel(lock_key(v.at("key_prefix"), v.at("resource")));
    } else if (name == "permit_resource") {
      built = permit_resource(v.at("semaphore"), std::stoul(v.at("permit")));
    } else if (name == "election_resource") {
      built = election::resource_for(v.at("role"));
    } else if (name == "leader_record_key") {
      built = leader_record_key(lock_key(v.at("key_prefix"), election::resource_for(v.at("role"))));
    } else if (name == "leader_record") {
      leader_record r;
      r.term = std::stoull(v.at("term"));
      r.token_sha1 = sha1_hex(v.at("token"));
      r.identity = v.at("identity");
      built = format_leader_record(r);
      auto back = parse_leader_record(value);
      ASSERT_TRUE(back.has_value());
      EXPECT_EQ(back->identity, r.identity);
    } else {
      ADD_FAILURE() << "key-examples: unknown name " << name;
      continue;
    }
    EXPECT_EQ(built, value);
    checked.insert(name);
  }
  for (const char* n : {"lock_key", "fence_key", "release_channel", "permit_resource", "election_resource",
                        "leader_record_key", "leader_record"}) {
    EXPECT_TRUE(checked.count(n)) << "key-examples has no " << n;
  }
}

// A cluster node's names (issue 23): what the library puts on the wire for them (the cluster
// form of the fenced acquire), and the channel the release script derives from KEYS[1].
TEST_F(ProtocolDoc, cluster_key_names_are_the_documented_examples) {
  const auto examples = key_examples(doc_, "cluster-key-examples");
  ASSERT_FALSE(examples.empty()) << "docs/protocol.md has no ```text id=cluster-key-examples block";
  std::map<std::string, std::string> v;
  std::set<std::string> checked;
  for (const auto& [name, value] : examples) {
    SCOPED_TRACE(name + " = " + value);
    if (name == "key_prefix" || name == "resource" || name == "role") {
      v[name] = value;
      continue;
    }
    const std::string L = lock_key(v.at("key_prefix"), v.at("resource"));
    std::string built;
    if (name == "cluster_lock_key" || name == "cluster_fence_key") {
      command c;
      c.script = script_id::acquire_fenced;
      c.key = L;
      c.key2 = fence_key(L);
      c.arg1 = "0123456789abcdef0123456789abcdef";
      c.arg2 = "1000";
      const std::string sent = wire(c).cluster_form().sha_form();
      built = name == "cluster_lock_key" ? cluster_key(L, L) : cluster_key(L, fence_key(L));
      const std::string as_bulk = "$" + std::to_string(built.size()) + "\r\n" + built + "\r\n";
      EXPECT_NE(sent.find(as_bulk), std::string::npos) << "not on the wire as documented: " << sent;
    } else if (name == "cluster_release_channel") {
      // The release script publishes on KEYS[1] .. ':released'.
      built = cluster_key(L, L) + std::string(kReleasedSuffix);
      EXPECT_EQ(built, cluster_key(L, release_channel(L)));
      EXPECT_NE(std::string(get_script(script_id::release).body).find("KEYS[1] .. ':released'"), std::string::npos);
    } else if (name == "election_resource") {
      built = election::resource_for(v.at("role"));
    } else if (name == "cluster_leader_record_key") {
      const std::string E = lock_key(v.at("key_prefix"), election::resource_for(v.at("role")));
      built = cluster_key(E, leader_record_key(E));
    } else {
      ADD_FAILURE() << "cluster-key-examples: unknown name " << name;
      continue;
    }
    EXPECT_EQ(built, value);
    checked.insert(name);
  }
  for (const char* n : {"cluster_lock_key", "cluster_fence_key", "cluster_release_channel", "cluster_leader_record_key"}) {
    EXPECT_TRUE(checked.count(n)) << "cluster-key-examples has no " << n;
  }
}

TEST_F(ProtocolDoc, tokens_have_the_documented_shape) {
  EXPECT_NE(doc_.find("32 lowercase hexadecimal characters (`[0-9a-f]{32}`)"), std::string::npos);
  for (int i = 0; i < 8; ++i) {
    const std::string t = make_token();
    ASSERT_EQ(t.size(), 32u);
    for (char c : t) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << t;
  }
}

TEST_F(ProtocolDoc, the_documented_suffixes_are_the_librarys) {
  for (std::string_view s : {kFenceSuffix, kLeaderSuffix, kReleasedSuffix}) {
    EXPECT_NE(doc_.find("+ `" + std::string(s) + "`"), std::string::npos) << s;
  }
  EXPECT_NE(doc_.find("`NAME + \":permit:\" + i`"), std::string::npos);
  EXPECT_NE(doc_.find("the resource `election:` + ROLE"), std::string::npos);
}

}  // namespace
}  // namespace redlock::detail

// The help texts, the man page and the bash completion, all rendered from the
// tables in args.cc, so they cannot drift apart.
#include <string>
#include <string_view>
#include <vector>

#include "args.h"

namespace redlock::cli {
namespace {

constexpr std::size_t help_column = 24;

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// "-q, --quiet", "--ttl D".
std::string option_label(const option_doc& o) {
  std::string label;
  if (o.short_name != nullptr) label = std::string(o.short_name) + ", ";
  label += o.name;
  if (o.metavar != nullptr) label += std::string(" ") + o.metavar;
  return label;
}

void append_option(std::string& out, const option_doc& o) {
  std::string label = "  " + option_label(o);
  const auto help = lines_of(o.help);
  if (label.size() + 1 > help_column) {
    out += label + "\n";
    label.clear();
  }
  for (std::size_t i = 0; i < help.size(); ++i) {
    std::string line = i == 0 ? label : std::string();
    line.resize(help_column, ' ');
    out += line + std::string(help[i]) + "\n";
  }
}

bool is_global(const option_doc& o) { return o.commands == all_commands; }

// The synopsis lines of a command after "redlock NAME", the continuation lines
// indented to `indent`.
std::string synopsis(const command_doc& c, std::size_t indent) {
  std::string out;
  const auto lines = lines_of(c.synopsis);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n" + std::string(indent, ' ');
    out += lines[i];
  }
  return out;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

// --- troff ---

// Escapes text for troff: backslashes, hyphens (as \-, so options copy and search
// as ASCII) and a leading control character.
std::string roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out.push_back(c);
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

// Joins the lines of a text into one paragraph for troff to fill.
std::string roff_paragraph(std::string_view text) {
  std::string out;
  for (auto line : lines_of(text)) {
    if (!out.empty()) out += "\n";
    out += roff(line);
  }
  return out + "\n";
}

// A preformatted section: the lines as they are (a section's own lines are
// indented by two spaces in the help; .RS indents them here instead).
std::string roff_block(std::string_view text) {
  std::string out = ".nf\n";
  for (auto line : lines_of(text)) {
    if (line.rfind("  ", 0) == 0) line.remove_prefix(2);
    out += line.empty() ? std::string("\n") : roff(line) + "\n";
  }
  return out + ".fi\n";
}

// The examples: paragraphs of prose, and command lines (lines starting with "$ " or
// "# " and what follows them up to a blank line) kept as they are.
std::string roff_examples(std::string_view text) {
  std::string out;
  bool in_code = false, in_prose = false;
  for (auto line : lines_of(text)) {
    if (line.empty()) {
      if (in_code) out += ".fi\n.RE\n";
      in_code = in_prose = false;
      continue;
    }
    const bool code = line.rfind("$ ", 0) == 0 || line.rfind("  ", 0) == 0;
    if (code && !in_code) out += ".PP\n.RS 4\n.nf\n";
    if (!code && !in_prose && !in_code) out += ".PP\n";
    in_code = in_code || code;
    in_prose = in_prose || !code;
    if (line.rfind("  ", 0) == 0) line.remove_prefix(2);  // .RS indents it
    out += roff(line) + "\n";
  }
  if (in_code) out += ".fi\n.RE\n";
  return out;
}

// An option's help as one line for a completion menu: its first sentence (up to
// ". " or the end), lines joined, at most 72 characters.
std::string short_help(std::string_view help) {
  std::string text;
  for (auto line : lines_of(help)) text += (text.empty() ? "" : " ") + std::string(line);
  const std::size_t stop = text.find(". ");
  if (stop != std::string::npos) text.resize(stop);
  if (!text.empty() && text.back() == '.') text.pop_back();
  if (text.size() > 72) {
    text.resize(69);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    text += "...";
  }
  return text;
}

// `text` inside a single-quoted shell word (zsh, fish): ' becomes '\''.
std::string single_quoted(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out;
}

// A completion description for zsh's _arguments: no brackets or colons, which
// delimit its fields.
std::string zsh_description(std::string_view help) {
  std::string out = short_help(help);
  for (std::size_t at = out.find("://"); at != std::string::npos; at = out.find("://")) out.erase(at, 3);
  for (char& c : out) {
    if (c == '[') c = '(';
    if (c == ']') c = ')';
    if (c == ':') c = ',';
  }
  return single_quoted(out);
}

bool takes(const option_doc& o, command c) { return (o.commands & command_bit(c)) != 0; }

}  // namespace

const char* durations_text() noexcept {
  return "Durations are milliseconds (250) or a number with a unit: 250ms, 1.5s,\n"
         "2m, 1h. A fraction needs a unit and must come to whole milliseconds.\n"
         "run and elect refuse a bare --ttl below 1000 (30 would be 30ms: say 30s).";
}

const char* environment_text() noexcept {
  return "  REDLOCK_NODES         The nodes, as --nodes (the option wins).\n"
         "  REDLOCK_PASSWORD      Password for every node URI without one\n"
         "                        (--password-file wins). Not passed to run's CMD.\n"
         "  REDLOCK_TOKEN         release, extend: the token when none is given.\n"
         "  REDLOCK_MAX_TTL       As --max-ttl (the option wins).\n"
         "  REDLOCK_TLS_CA, REDLOCK_TLS_CA_DIR, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY,\n"
         "  REDLOCK_TLS_SERVER_NAME, REDLOCK_TLS_INSECURE=1\n"
         "                        As the --tls-* options (the options win).";
}

const char* exit_status_text() noexcept {
  return "  0    success\n"
         "  1    release or extend refused: TOKEN does not own the lock on a quorum\n"
         "  64   usage error: a bad command line\n"
         "  69   quorum unavailable: too few nodes answered, or answered too\n"
         "       slowly for the TTL\n"
         "  70   run: the lock was lost while CMD ran; elect: the leadership\n"
         "       was lost while CMD ran; or an internal error\n"
         "  75   the lock is held by another owner (after --wait, if given);\n"
         "       acquire, run: N instead with --conflict-exit-code N\n"
         "  77   the nodes refused the credentials, the ACL denies the lock a\n"
         "       command or key, or TLS verification failed\n"
         "  78   configuration error: a bad node URI, no nodes, conflicting\n"
         "       options, an unsafe or unreadable password file, bad TLS files\n"
         "  126  run, elect: CMD cannot be executed\n"
         "  127  run, elect: CMD not found\n"
         "  128+N  interrupted by signal N before CMD started; run, elect: CMD\n"
         "       killed by signal N\n"
         "  other  run, elect: CMD's exit status";
}

const char* examples_text() noexcept {
  return "Run a report on one host at a time across three nodes; the other hosts\n"
         "exit 75 at once (or wait up to a minute with --wait 1m):\n"
         "\n"
         "$ export REDLOCK_NODES=redis://lock1.example:6379,redis://lock2.example:6379,redis://lock3.example:6379\n"
         "$ redlock run reports/daily --ttl 30s -- ./make-report --date today\n"
         "\n"
         "Take a lock in one step of a script and release it in another:\n"
         "\n"
         "$ redlock acquire jobs/deploy --ttl 5m > /run/deploy.token\n"
         "$ redlock release jobs/deploy --token - < /run/deploy.token\n"
         "\n"
         "From cron (/etc/cron.d/nightly-report), where the environment is empty: the\n"
         "nodes come from an env file of NAME=VALUE lines, the password from a file\n"
         "only its user can read, and the hosts that find the job running elsewhere\n"
         "exit 0 and print nothing:\n"
         "\n"
         "  30 2 * * * root set -a; . /etc/redlock/redlock.env; set +a; exec /usr/local/bin/redlock run jobs/nightly --ttl 5m --conflict-exit-code 0 -q --password-file /etc/redlock/password -- /usr/local/bin/nightly-report\n"
         "\n"
         "From a systemd service started by a timer, with the same two files:\n"
         "\n"
         "  [Service]\n"
         "  Type=oneshot\n"
         "  EnvironmentFile=/etc/redlock/redlock.env\n"
         "  ExecStart=/usr/local/bin/redlock run jobs/nightly --ttl 5m --conflict-exit-code 0 -q --password-file /etc/redlock/password -- /usr/local/bin/nightly-report\n"
         "\n"
         "Watch the nodes, serving Prometheus metrics on a loopback port:\n"
         "\n"
         "$ redlock monitor --prometheus 127.0.0.1:9121";
}

std::string help_text() {
  std::string out = "redlock - take, hold, inspect and benchmark a Redlock lock from a shell\n\nUsage:\n";
  for (const auto& c : command_docs()) {
    out += "  redlock " + pad(c.name, 8) + synopsis(c, 18) + "\n";
  }
  out += "  redlock help [COMMAND] | --help | -V, --version\n\nCommands:\n";
  for (const auto& c : command_docs()) {
    const auto lines = lines_of(c.summary);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out += "  " + pad(i == 0 ? c.name : "", 9) + std::string(lines[i]) + "\n";
    }
  }
  out +=
      "\nGlobal options, for every command, anywhere after the command and before\n"
      "\"--\", as --opt VALUE or --opt=VALUE:\n";
  for (const auto& o : option_docs()) {
    if (is_global(o)) append_option(out, o);
  }
  out += "  -V, --version         Print the version (before any command).\n";
  out += "\nCommand options (\"redlock help COMMAND\" lists a command's own):\n";
  for (const auto& o : option_docs()) {
    if (!is_global(o)) append_option(out, o);
  }
  out += "\n" + std::string(durations_text()) + "\n\nEnvironment:\n" + environment_text() +
         "\n\nExit status:\n" + exit_status_text() +
         "\nErrors are one line on stderr starting with \"redlock: \"; warnings are\n"
         "lines starting with \"redlock: warning: \".\n";
  return out;
}

std::string help_text(command cmd) {
  const command_doc* c = nullptr;
  for (const auto& d : command_docs()) {
    if (d.cmd == cmd) c = &d;
  }
  if (c == nullptr) return help_text();
  const std::string head = "Usage: redlock " + std::string(c->name) + " ";
  std::string out = head + synopsis(*c, head.size()) + "\n\n" + c->details + "\n";
  bool any = false;
  for (const auto& o : option_docs()) {
    if (is_global(o) || (o.commands & command_bit(cmd)) == 0) continue;
    if (!any) out += "\nOptions:\n";
    any = true;
    append_option(out, o);
  }
  out +=
      "\nGlobal options (--nodes, --password-file, timeouts, --max-ttl, --tls-*,\n"
      "--json, -q): see \"redlock --help\".\n";
  return out;
}

std::string man_page(const std::string& version) {
  std::string out;
  out += ".\\\" Generated from the tables in tools/redlock/args.cc (redlock_gendoc); do not edit.\n";
  out += ".TH REDLOCK 1 \"\" \"redlock " + roff(version) + "\" \"User Commands\"\n";
  out += ".nh\n.ad l\n";  // no hyphenation of option names, no stretched blanks
  out += ".SH NAME\nredlock \\- take, hold, inspect and benchmark a Redlock lock from a shell\n";
  out += ".SH SYNOPSIS\n";
  for (const auto& c : command_docs()) {
    out += ".B redlock " + std::string(c.name) + "\n";
    std::string syn;
    for (auto line : lines_of(c.synopsis)) syn += (syn.empty() ? "" : " ") + std::string(line);
    out += roff(syn) + "\n.br\n";
  }
  out += ".B redlock help\n[COMMAND] | \\-\\-help | \\-V, \\-\\-version\n";
  out += ".SH DESCRIPTION\n";
  out += "Takes, holds, inspects and benchmarks a Redlock lock over N independent Redis masters.\n";
  out += ".SH COMMANDS\n";
  for (const auto& c : command_docs()) {
    out += ".TP\n.B " + std::string(c.name) + "\n" + roff_paragraph(c.details);
  }
  const auto options = [&](bool global) {
    for (const auto& o : option_docs()) {
      if (is_global(o) != global) continue;
      out += ".TP\n";
      std::string label = o.short_name != nullptr ? "\\fB" + roff(o.short_name) + "\\fR, " : std::string();
      label += "\\fB" + roff(o.name) + "\\fR";
      if (o.metavar != nullptr) label += " \\fI" + roff(o.metavar) + "\\fR";
      out += label + "\n" + roff_paragraph(o.help);
    }
  };
  out += ".SH GLOBAL OPTIONS\n";
  out += "For every command, anywhere after the command and before \\(lq\\-\\-\\(rq, as\n"
         ".B \\-\\-opt VALUE\nor\n.BR \\-\\-opt=VALUE .\n";
  options(true);
  out += ".TP\n\\fB\\-V\\fR, \\fB\\-\\-version\\fR\nPrint the version (before any command).\n";
  out += ".SH COMMAND OPTIONS\n";
  options(false);
  out += ".SH DURATIONS\n" + roff_paragraph(durations_text());
  out += ".SH ENVIRONMENT\n" + roff_block(environment_text());
  out += ".SH EXIT STATUS\n" + roff_block(exit_status_text());
  out += ".PP\nErrors are one line on stderr starting with \\(lqredlock: \\(rq; warnings are lines\n"
         "starting with \\(lqredlock: warning: \\(rq.\n";
  out += ".SH EXAMPLES\n" + roff_examples(examples_text());
  out += ".SH SEE ALSO\n"
         ".BR flock (1),\n.BR crontab (5),\n.BR systemd.service (5),\n.BR systemd.timer (5),\n"
         ".BR redis\\-server (1).\n"
         "The README, the CHANGELOG and the LICENSE are installed in share/doc/redlock under\n"
         "the installation prefix.\n";
  return out;
}

// Every command's name, separated by blanks (the completions' word lists).
static std::string command_names() {
  std::string names;
  for (const auto& c : command_docs()) names += (names.empty() ? "" : " ") + std::string(c.name);
  return names;
}

std::string bash_completion() {
  const std::string commands = command_names();

  std::string out =
      "# bash completion for redlock(1). Generated from the tables in\n"
      "# tools/redlock/args.cc (redlock_gendoc); do not edit.\n"
      "_redlock() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
      "  local cmd= i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    if [[ -z $cmd ]]; then\n"
      "      case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]} ;; esac\n"
      "    elif [[ ${COMP_WORDS[i]} == -- ]]; then\n"
      "      # run's command: complete it as a command line of its own.\n"
      "      if ((i + 1 == COMP_CWORD)); then\n"
      "        COMPREPLY=($(compgen -c -- \"$cur\"))\n"
      "      else\n"
      "        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "      fi\n"
      "      return 0\n"
      "    fi\n"
      "  done\n"
      "  if [[ -z $cmd ]]; then\n"
      "    COMPREPLY=($(compgen -W '" + commands + " help --help -h --version -V' -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  case $prev in\n";
  // Options whose value is a file or a directory.
  std::string files, dirs;
  for (const auto& o : option_docs()) {
    if (o.metavar == nullptr) continue;
    const std::string_view m = o.metavar;
    if (m == "FILE") files += (files.empty() ? "" : "|") + std::string(o.name);
    if (m == "DIR") dirs += (dirs.empty() ? "" : "|") + std::string(o.name);
  }
  out += "    " + files + ")\n      COMPREPLY=($(compgen -f -- \"$cur\"))\n      return 0 ;;\n";
  out += "    " + dirs + ")\n      COMPREPLY=($(compgen -d -- \"$cur\"))\n      return 0 ;;\n";
  std::string valued;
  for (const auto& o : option_docs()) {
    if (o.metavar == nullptr) continue;
    const std::string_view m = o.metavar;
    if (m == "FILE" || m == "DIR") continue;
    valued += (valued.empty() ? "" : "|") + std::string(o.name);
  }
  out += "    " + valued + ")\n      return 0 ;;\n  esac\n  local opts\n  case $cmd in\n";
  for (const auto& c : command_docs()) {
    std::string opts;
    for (const auto& o : option_docs()) {
      if ((o.commands & command_bit(c.cmd)) == 0) continue;
      if (o.short_name != nullptr) opts += (opts.empty() ? "" : " ") + std::string(o.short_name);
      opts += (opts.empty() ? "" : " ") + std::string(o.name);
    }
    out += "    " + std::string(c.name) + ") opts='" + opts + (c.cmd == command::run || c.cmd == command::elect ? " --" : "") + "' ;;\n";
  }
  out += "    help) COMPREPLY=($(compgen -W '" + commands + "' -- \"$cur\")); return 0 ;;\n";
  out += "    *) return 0 ;;\n  esac\n";
  out += "  if [[ $cur == -* ]]; then\n"
         "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
         "  fi\n"
         "  return 0\n"
         "}\n"
         "complete -F _redlock redlock\n";
  return out;
}

std::string zsh_completion() {
  std::string out =
      "#compdef redlock\n"
      "# zsh completion for redlock(1). Generated from the tables in\n"
      "# tools/redlock/args.cc (redlock_gendoc); do not edit.\n"
      "_redlock() {\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const auto& c : command_docs()) {
    out += "    '" + std::string(c.name) + ":" + single_quoted(short_help(c.summary)) + "'\n";
  }
  out +=
      "  )\n"
      "  if (( CURRENT == 2 )); then\n"
      "    _describe -t commands 'redlock command' commands\n"
      "    _arguments '(- *)'{-h,--help}'[print the help]' '(- *)'{-V,--version}'[print the version]'\n"
      "    return\n"
      "  fi\n"
      "  local i\n"
      "  for (( i = 3; i < CURRENT; i++ )); do\n"
      "    if [[ $words[i] == -- ]]; then\n"
      "      # run's and elect's command: complete it as a command line of its own.\n"
      "      shift $i words\n"
      "      (( CURRENT -= i ))\n"
      "      _normal\n"
      "      return\n"
      "    fi\n"
      "  done\n"
      "  case $words[2] in\n";
  for (const auto& c : command_docs()) {
    out += "    " + std::string(c.name) + ")\n      _arguments -S : \\\n";
    for (const auto& o : option_docs()) {
      if (!takes(o, c.cmd)) continue;
      const std::string desc = zsh_description(o.help);
      std::string spec;
      if (o.short_name != nullptr) {
        spec = "'(" + std::string(o.short_name) + " " + o.name + ")'{" + o.short_name + "," + o.name + "}";
        spec += o.metavar != nullptr ? "'[" + desc + "]" : "'[" + desc + "]'";
      } else {
        spec = "'" + std::string(o.name) + (o.metavar != nullptr ? "=[" : "[") + desc + "]";
        if (o.metavar == nullptr) spec += "'";
      }
      if (o.metavar != nullptr) {
        const std::string_view m = o.metavar;
        const std::string action = m == "FILE" ? "_files" : m == "DIR" ? "_files -/" : " ";
        spec += ":" + std::string(o.metavar) + ":" + action + "'";
      }
      out += "        " + spec + " \\\n";
    }
    out += "        '*:argument: '\n      ;;\n";
  }
  out +=
      "    help)\n"
      "      _describe -t commands 'redlock command' commands\n"
      "      ;;\n"
      "  esac\n"
      "}\n"
      "_redlock \"$@\"\n";
  return out;
}

std::string fish_completion() {
  const std::string all = command_names();
  std::string out =
      "# fish completion for redlock(1). Generated from the tables in\n"
      "# tools/redlock/args.cc (redlock_gendoc); do not edit.\n"
      "complete -c redlock -f\n"
      "complete -c redlock -n 'not __fish_seen_subcommand_from " + all + " help' -s h -l help -d 'Print the help'\n"
      "complete -c redlock -n 'not __fish_seen_subcommand_from " + all + " help' -s V -l version -d 'Print the version'\n";
  for (const auto& c : command_docs()) {
    out += "complete -c redlock -n 'not __fish_seen_subcommand_from " + all + " help' -a " + c.name + " -d '" +
           single_quoted(short_help(c.summary)) + "'\n";
  }
  out += "complete -c redlock -n 'not __fish_seen_subcommand_from " + all + " help' -a help -d 'Print the help of a command'\n";
  out += "complete -c redlock -n '__fish_seen_subcommand_from help' -a '" + all + "'\n";
  // One line per option: the commands that take it, then the option.
  for (const auto& o : option_docs()) {
    std::string cmds;
    for (const auto& c : command_docs()) {
      if (takes(o, c.cmd)) cmds += " " + std::string(c.name);
    }
    std::string line = "complete -c redlock -n '__fish_seen_subcommand_from" + cmds + "'";
    if (o.short_name != nullptr) line += " -s " + std::string(o.short_name + 1);
    line += " -l " + std::string(o.name + 2);
    if (o.metavar != nullptr) {
      const std::string_view m = o.metavar;
      line += m == "FILE" ? " -r -F" : m == "DIR" ? " -x -a '(__fish_complete_directories)'" : " -x";
    }
    line += " -d '" + single_quoted(short_help(o.help)) + "'\n";
    out += line;
  }
  return out;
}

}  // namespace redlock::cli

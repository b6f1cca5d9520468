// Passwords and tokens for the tool, kept off the command line: reading a password
// file and a token from stdin, putting a password into node URIs that lack one,
// taking it out of URIs passed on (run's command), and scrubbing it from argv.
// docs/cli.md, "Secrets". Everything but the two readers is pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::cli {

// True when the URI carries a password: redis:// or rediss:// with "user:pw@" or ":pw@".
bool uri_has_password(std::string_view uri);

// The URI with `password` (percent-encoded) put into it when it is a redis:// or
// rediss:// URI without one ("redis://host" -> "redis://:pw@host",
// "redis://alice@host" -> "redis://alice:pw@host"); a URI with a password is
// returned as it is. False with `error` set for a unix:// URI (which carries no
// credentials in this version).
bool add_password(std::string_view uri, const std::string& password, std::string& out, std::string& error);

// The URI without any password: "redis://alice:pw@host" -> "redis://alice@host",
// "redis://:pw@host" -> "redis://host". Anything else is returned unchanged.
std::string remove_password(std::string_view uri);

// The [begin, end) byte ranges of passwords in a comma-separated node list, which
// may follow "--option=" in the same argument.
std::vector<std::pair<std::size_t, std::size_t>> password_spans(std::string_view arg);

// What scrub_argv() shows instead of each password: the same for every password,
// so that ps does not tell its length.
inline constexpr std::string_view password_mask = "***";

// `arg` with every password in it (as password_spans) replaced by `mask`.
std::string mask_passwords(std::string_view arg, std::string_view mask = password_mask);

// Replaces every password in the arguments argv[i] (i in `which`: node lists, as
// password_spans) by password_mask, in place in the memory the kernel shows as
// /proc/PID/cmdline (and ps): what they show from then on. The arguments from the
// first changed one on are rewritten one after the other (argv[i] updated), and
// the bytes the shorter masks free are zeroed at the end of the last argument.
// Should the masks need more room than the passwords give (passwords of one or two
// characters), each password becomes one '*' instead. argv[0] never moves. Arguments
// that do not lie one after the other are each masked in their own place.
void scrub_argv(int argc, char** argv, const std::vector<std::size_t>& which) noexcept;

// Reads a password file: a regular file, readable by this user, not readable by
// group or others; one trailing newline is stripped; it must not be empty then.
// On failure returns false and sets `error` to a message naming the file and the
// problem (never its content).
bool read_password_file(const std::string& path, std::string& password, std::string& error);

// Reads a token from the file descriptor (stdin): one line, its newline stripped.
// On failure returns false and sets `error`.
bool read_token(int fd, std::string& token, std::string& error);

}  // namespace redlock::cli

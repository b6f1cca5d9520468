// Test certificates for TLS tests, made once per test process with the `openssl`
// command-line tool (OpenSSL 3) into a directory under the process's test base
// directory (see redis_node.h), removed at exit. EC P-256 keys, unencrypted PEM.
//
// Thread safety: get() may be called from any thread; the result is immutable.
#pragma once

#include <string>

namespace redlock::test {

struct tls_certs {
  std::string dir;
  // The test CA (trust this one: tls_options::ca_file).
  std::string ca_file;
  // Signed by the CA, SAN DNS:localhost and IP:127.0.0.1, valid now.
  std::string server_cert, server_key;
  // Signed by the CA, SAN DNS:localhost only (no IP SAN).
  std::string dns_only_cert, dns_only_key;
  // Signed by the CA, SAN DNS:wrong.example only.
  std::string wrong_name_cert, wrong_name_key;
  // Signed by the CA, subject CN=localhost and no subjectAltName at all.
  std::string cn_only_cert, cn_only_key;
  // Signed by the CA, SAN DNS:localhost and IP:127.0.0.1, valid in January 2020 only.
  std::string expired_cert, expired_key;
  // A second CA nobody trusts, and a server certificate it signed (good SANs).
  std::string other_ca_file;
  std::string unknown_ca_cert, unknown_ca_key;
  // A client certificate (extendedKeyUsage clientAuth) signed by the CA.
  std::string client_cert, client_key;
  // A client certificate signed by the unknown CA (a server trusting the CA rejects it).
  std::string other_client_cert, other_client_key;
  // A hashed CA directory (`openssl rehash`: <subject hash>.0 links) holding only the CA.
  std::string ca_dir;

  // Generates them on the first call. Throws std::runtime_error with the tool's
  // output when openssl fails.
  static const tls_certs& get();
};

}  // namespace redlock::test

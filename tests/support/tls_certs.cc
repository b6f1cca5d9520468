#include "tls_certs.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "redis_node.h"

namespace redlock::test {
namespace {

// The whole recipe, run by /bin/sh in the target directory. `openssl x509 -req`
// (3.0) cannot date a certificate in the past: the expired one is signed by
// `openssl ca` with -startdate/-enddate.
constexpr const char* kScript = R"SH(set -e
key() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -subj "/CN=$2" -out "$1.csr"; }
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -subj "/CN=$2" -days 30 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.pem"
}
sign() {
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$3" "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.pem"
}
ca ca "redlock test CA"
ca other_ca "an unknown CA"
key server localhost && sign server ca "DNS:localhost,IP:127.0.0.1" serverAuth
key dns_only localhost && sign dns_only ca "DNS:localhost" serverAuth
key wrong_name wrong.example && sign wrong_name ca "DNS:wrong.example" serverAuth
key cn_only localhost && printf 'extendedKeyUsage=serverAuth\n' > cn_only.ext &&
  openssl x509 -req -in cn_only.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile cn_only.ext -out cn_only.pem
key unknown_ca localhost && sign unknown_ca other_ca "DNS:localhost,IP:127.0.0.1" serverAuth
key client redlock-client && sign client ca "DNS:redlock-client" clientAuth
key other_client redlock-client && sign other_client other_ca "DNS:redlock-client" clientAuth
mkdir ca_dir && cp ca.pem ca_dir/ && openssl rehash ca_dir
D=$(pwd)
mkdir -p newcerts && : > index.txt && echo 01 > serial
cat > ca.cnf <<EOC
[ca]
default_ca = d
[d]
dir = $D
database = $D/index.txt
new_certs_dir = $D/newcerts
serial = $D/serial
certificate = $D/ca.pem
private_key = $D/ca.key
default_md = sha256
policy = p
unique_subject = no
[p]
commonName = supplied
[x]
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth
EOC
key expired localhost
openssl ca -batch -config ca.cnf -extensions x -startdate 20200101000000Z -enddate 20200201000000Z \
  -in expired.csr -out expired.pem -notext
chmod 644 *.key
)SH";

struct holder {
  tls_certs certs;
  holder() {
    certs.dir = make_test_dir("tls");
    const std::string script = certs.dir + "/gen.sh";
    std::ofstream(script) << kScript;
    const std::string cmd = "cd '" + certs.dir + "' && /bin/sh gen.sh > gen.log 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc != 0) {
      std::ifstream log(certs.dir + "/gen.log");
      const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      throw std::runtime_error("generating test certificates failed (" + cmd + "):\n" + out);
    }
    auto at = [&](const char* name) { return certs.dir + "/" + name; };
    certs.ca_file = at("ca.pem");
    certs.server_cert = at("server.pem");
    certs.server_key = at("server.key");
    certs.dns_only_cert = at("dns_only.pem");
    certs.dns_only_key = at("dns_only.key");
    certs.wrong_name_cert = at("wrong_name.pem");
    certs.wrong_name_key = at("wrong_name.key");
    certs.cn_only_cert = at("cn_only.pem");
    certs.cn_only_key = at("cn_only.key");
    certs.expired_cert = at("expired.pem");
    certs.expired_key = at("expired.key");
    certs.other_ca_file = at("other_ca.pem");
    certs.unknown_ca_cert = at("unknown_ca.pem");
    certs.unknown_ca_key = at("unknown_ca.key");
    certs.client_cert = at("client.pem");
    certs.client_key = at("client.key");
    certs.other_client_cert = at("other_client.pem");
    certs.other_client_key = at("other_client.key");
    certs.ca_dir = at("ca_dir");
  }
  ~holder() {
    std::error_code ec;
    std::filesystem::remove_all(certs.dir, ec);
  }
};

}  // namespace

const tls_certs& tls_certs::get() {
  static const holder h;
  return h.certs;
}

}  // namespace redlock::test

#ifndef KF_CSODIUM_SHIM_H
#define KF_CSODIUM_SHIM_H
// libsodium: Ristretto255 (sr25519), BLAKE2b (Substrate's hash and SS58 checksums) and
// XSalsa20-Poly1305 (polkadot-js JSON backups). Only these; symmetric crypto elsewhere is OpenSSL's.
#include <sodium.h>
#endif

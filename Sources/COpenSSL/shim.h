#ifndef KF_COPENSSL_SHIM_H
#define KF_COPENSSL_SHIM_H
// Hide every API deprecated in OpenSSL 3.0 so Swift cannot even see it.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/asn1.h>
#include <openssl/objects.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/hmac.h>

// Macros that are expressions over other macros are not imported by Swift.
static const int KF_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;
static const int KF_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;
static const int KF_RSA_PKCS1_PSS_PADDING = RSA_PKCS1_PSS_PADDING;
static const int KF_RSA_PSS_SALTLEN_DIGEST = RSA_PSS_SALTLEN_DIGEST;
static const int KF_RSA_PSS_SALTLEN_AUTO = RSA_PSS_SALTLEN_AUTO;
static const unsigned long KF_X509_V_FLAG_NO_CHECK_TIME = X509_V_FLAG_NO_CHECK_TIME;
static const unsigned long KF_X509_V_FLAG_USE_CHECK_TIME = X509_V_FLAG_USE_CHECK_TIME;
static const unsigned long KF_X509_V_FLAG_PARTIAL_CHAIN = X509_V_FLAG_PARTIAL_CHAIN;

static const int KF_EVP_CTRL_GCM_GET_TAG = EVP_CTRL_GCM_GET_TAG;
static const int KF_EVP_CTRL_GCM_SET_TAG = EVP_CTRL_GCM_SET_TAG;

static const int KF_EVP_PKEY_EC = EVP_PKEY_EC;
static const int KF_EVP_PKEY_RSA = EVP_PKEY_RSA;
static const int KF_EVP_PKEY_RSA_PSS = EVP_PKEY_RSA_PSS;
static const int KF_EVP_PKEY_ED25519 = EVP_PKEY_ED25519;

// Random bytes from the kernel's CSPRNG (getrandom(2): blocks only until it is seeded at boot,
// needs no file descriptor, so running out of descriptors cannot stop it). OpenSSL 3.0's RAND_bytes
// costs twice as much a call under load (its DRBG's locks and fork checks; BENCHMARKS.md, #46) and
// is the fallback only for a kernel without getrandom. Returns 1 on success.
#include <sys/random.h>
#include <errno.h>
static inline int kf_random_bytes(unsigned char *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = getrandom(buf + done, len - done, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOSYS && done == 0 && len <= 0x7fffffff && RAND_bytes(buf, (int)len) == 1) return 1;
            ERR_clear_error();
            return 0;
        }
        done += (size_t)n;
    }
    return 1;
}

// OPENSSL_free is a macro over CRYPTO_free(ptr, file, line).
static inline void kf_openssl_free(void *p) { OPENSSL_free(p); }

// Stack helpers: the sk_X509_* functions are macros over OPENSSL_sk_*.
static inline STACK_OF(X509) *kf_sk_X509_new(void) { return sk_X509_new_null(); }
static inline int kf_sk_X509_push(STACK_OF(X509) *s, X509 *x) { return sk_X509_push(s, x); }
static inline void kf_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
#endif

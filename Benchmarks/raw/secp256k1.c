/* Raw libsecp256k1 figures for compare.sh: schnorrsig_sign32 with a ready keypair (as the signer keeps one),
   xonly_pubkey_parse + schnorrsig_verify, and pubkey_parse + ecdh, in ops/s for 3 s each. */
#include <secp256k1.h>
#include <secp256k1_ecdh.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int copy_x(unsigned char *out, const unsigned char *x, const unsigned char *y, void *d) { (void)y; (void)d; memcpy(out, x, 32); return 1; }

int main(void) {
    secp256k1_context *ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    unsigned char sk[32], msg[32], aux[32], sig[64], xonly32[32], peer33[33] = {2}, out[32];
    for (int i = 0; i < 32; i++) { sk[i] = (unsigned char)(i + 1); msg[i] = (unsigned char)i; aux[i] = 0; }
    secp256k1_keypair kp; secp256k1_xonly_pubkey xonly; secp256k1_pubkey peer;
    secp256k1_keypair_create(ctx, &kp, sk);
    secp256k1_keypair_xonly_pub(ctx, &xonly, NULL, &kp);
    secp256k1_xonly_pubkey_serialize(ctx, xonly32, &xonly);
    memcpy(peer33 + 1, xonly32, 32);
    long n; double start;

    for (n = 0, start = now(); now() - start < 3; n += 64)
        for (int i = 0; i < 64; i++) { if (!secp256k1_schnorrsig_sign32(ctx, sig, msg, &kp, aux)) return 1; }
    printf("sign %.0f\n", n / (now() - start));
    for (n = 0, start = now(); now() - start < 3; n += 64)
        for (int i = 0; i < 64; i++) { secp256k1_xonly_pubkey_parse(ctx, &xonly, xonly32); if (!secp256k1_schnorrsig_verify(ctx, sig, msg, 32, &xonly)) return 1; }
    printf("verify %.0f\n", n / (now() - start));
    for (n = 0, start = now(); now() - start < 3; n += 64)
        for (int i = 0; i < 64; i++) { secp256k1_ec_pubkey_parse(ctx, &peer, peer33, 33); if (!secp256k1_ecdh(ctx, out, &peer, sk, copy_x, NULL)) return 1; }
    printf("ecdh %.0f\n", n / (now() - start));
    secp256k1_context_destroy(ctx);
    return 0;
}

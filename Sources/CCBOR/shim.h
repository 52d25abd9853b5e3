#include <cbor.h>

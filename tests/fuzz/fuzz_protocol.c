/* libFuzzer target: the protocol decoder must reject or accept any byte
 * string without reading out of bounds, and whatever it accepts must
 * re-encode to a frame that decodes the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvs_msg m;
	size_t used = 0;
	size_t off = 0;
	/* Decode a stream of frames, as the scheduler's reader does. */
	while (off < size && nvs_msg_decode(data + off, size - off, &m, &used) == NVS_DECODE_OK) {
		if (used == 0 || used > size - off)
			abort();
		static uint8_t out[NVS_HEADER_SIZE + NVS_MAX_PAYLOAD];
		size_t n = nvs_msg_encode(&m, out, sizeof out);
		if (n) {
			struct nvs_msg again;
			size_t used2;
			if (nvs_msg_decode(out, n, &again, &used2) != NVS_DECODE_OK || used2 != n)
				abort();
			if (again.type != m.type)
				abort();
		}
		off += used;
	}
	return 0;
}

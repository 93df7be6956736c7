/*
 * Prints common/messages.def as scripts/check-messages-doc.sh compares it
 * with docs/protocol.md's message tables, one line a message:
 *   TYPE<TAB>NAME<TAB>BYTES<TAB>FIELD TYPES
 * e.g. "1	HELLO	22 + n	u32 u32 u32 u64 str" (a string is u16 + n).
 */
#include "protocol.h"

#include <stdio.h>
#include <string.h>

struct shape {
	unsigned fixed;
	int var;
	char types[128];
};

static void field(struct shape *s, const char *t, unsigned n, int var)
{
	s->fixed += n;
	s->var |= var;
	if (s->types[0])
		strcat(s->types, " ");
	strcat(s->types, t);
}

#define NVS_U32(f) field(s, "u32", 4, 0);
#define NVS_I32(f) field(s, "i32", 4, 0);
#define NVS_U64(f) field(s, "u64", 8, 0);
#define NVS_STR(f) field(s, "str", 2, 1);
#define NVS_LAYOUT(member, type, fields)                                                           \
	static void shape_##member(struct shape *s)                                                \
	{                                                                                          \
		fields                                                                             \
	}
#include "messages.def"

/* CTL_REPLY: i32 status, u32 text_len, the text. */
static void shape_reply(struct shape *s)
{
	field(s, "i32", 4, 0);
	field(s, "u32", 4, 1);
}

int main(void)
{
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	{                                                                                          \
		struct shape s = {0, 0, ""};                                                       \
		shape_##layout(&s);                                                                \
		printf("%u\t%s\t%u%s\t%s\n", (unsigned)(type), #name, s.fixed,                     \
		       s.var ? " + n" : "", s.types);                                              \
	}
#include "messages.def"
	return 0;
}

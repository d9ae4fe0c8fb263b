#include <string.h>

#include "kz_cap.h"
#include "banned.h"

const struct kz_cap kz_caps[] = {
#define KZ_CAP_ROW_(id, name, allows, what) {name, allows, what},
    KZ_CAPS(KZ_CAP_ROW_)
#undef KZ_CAP_ROW_
        {NULL, 0, NULL},
};

const struct kz_cap *
kz_cap_find(const char *name)
{
	if (name == NULL)
		return NULL;
	for (const struct kz_cap *c = kz_caps; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

bool
kz_cap_allows(const char *name, unsigned want)
{
	const struct kz_cap *c = kz_cap_find(name);

	return c != NULL && (c->allows & want) == want;
}

// SPDX-License-Identifier: BSD-3-Clause
/*
 * config.c - parse the knobs of config_table.h.
 *
 * Runs at gdrc_init only, outside every lock; reads the environment
 * once per context.  Never called from hook context.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_table.h"
#include "gdrc_int.h"
#include "log/log.h"

static int parse_uint(const char *s, uint64_t *v_p)
{
	static const char suffixes[] = "KMGT";
	unsigned long long v;
	const char *p;
	char *end;

	if (!strcasecmp(s, "inf") || !strcasecmp(s, "unlimited")) {
		*v_p = GDRC_LIMIT_NONE;
		return 0;
	}
	/* strtoull accepts "-1" and leading blanks; we do not. */
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end) {
		/* strchr would also find the terminating NUL: test first. */
		if (!isalpha((unsigned char)*end) || end[1])
			return -1;
		p = strchr(suffixes, toupper((unsigned char)*end));
		if (!p)
			return -1;
		for (long i = 0; i <= p - suffixes; i++) {
			if (v > UINT64_MAX / 1024)
				return -1;
			v *= 1024;
		}
	}
	*v_p = v;
	return 0;
}

static int parse_bool(const char *s, int *v_p)
{
	static const char *const yes[] = { "1", "y", "yes", "on", "true" };
	static const char *const no[] = { "0", "n", "no", "off", "false" };

	for (size_t i = 0; i < GDRC_ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(s, yes[i])) {
			*v_p = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*v_p = 0;
			return 0;
		}
	}
	return -1;
}

/* Index of s in "a|b|c", or -1. */
static int parse_choice(const char *s, const char *choices)
{
	size_t len = strlen(s);
	int idx = 0;

	for (const char *p = choices; *p; idx++) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);

		if (n == len && !strncasecmp(p, s, n))
			return idx;
		if (!bar)
			break;
		p = bar + 1;
	}
	return -1;
}

/*
 * A comma-separated list of distinct choices, at most GDRC_KNOB_LIST_MAX;
 * those of GDRC_KNOB_LIST_ALONE (auto, verbs, cufile) only alone.
 * @return 0 or -1.
 */
static int parse_list(const char *s, const char *choices, uint32_t *v_p)
{
	char word[32];
	uint32_t v = 0, seen = 0;
	int n = 0;

	for (const char *p = s;; n++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int idx;

		if (!len || len >= sizeof(word) || n == GDRC_KNOB_LIST_MAX)
			return -1;
		memcpy(word, p, len);
		word[len] = '\0';
		idx = parse_choice(word, choices);
		if (idx < 0 || (seen & (1u << idx)) ||
		    ((GDRC_KNOB_LIST_ALONE & (1u << idx)) && (n || comma)))
			return -1;
		seen |= 1u << idx;
		v |= (uint32_t)(idx + 1) << (4 * n);
		if (!comma)
			break;
		p = comma + 1;
	}
	*v_p = v;
	return 0;
}

gdrc_status_t gdrc_config_parse(size_t i, const char *value,
				struct gdrc_knobs *knobs)
{
	const struct gdrc_knob_desc *d = &gdrc_knob_table[i];
	char *field = (char *)knobs + d->offset;
	enum gdrc_log_level level;
	int ret = -1;

	switch (d->type) {
	case GDRC_KNOB_UINT:
		ret = parse_uint(value, (uint64_t *)field);
		break;
	case GDRC_KNOB_BOOL:
		ret = parse_bool(value, (int *)field);
		break;
	case GDRC_KNOB_CHOICE:
		ret = parse_choice(value, d->choices);
		if (ret >= 0) {
			*(int *)field = ret;
			ret = 0;
		}
		break;
	case GDRC_KNOB_LEVEL:
		ret = gdrc_log_level_parse(value, &level);
		if (!ret)
			*(int *)field = (int)level;
		break;
	case GDRC_KNOB_LIST:
		ret = parse_list(value, d->choices, (uint32_t *)field);
		break;
	case GDRC_KNOB_STRING:
		if (*value && strlen(value) < GDRC_KNOB_STR_MAX) {
			strcpy(field, value);
			ret = 0;
		}
		break;
	}
	if (ret) {
		gdrc_error("invalid value '%s' for %s: %s", value, d->name,
			   d->help);
		return GDRC_ERR_INVALID_PARAM;
	}
	return GDRC_OK;
}

gdrc_status_t gdrc_config_load(struct gdrc_knobs *knobs)
{
	gdrc_status_t status;

	memset(knobs, 0, sizeof(*knobs));
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(gdrc_knob_table); i++) {
		const char *v = getenv(gdrc_knob_table[i].name);

		status = gdrc_config_parse(i, v ? v : gdrc_knob_table[i].defval,
					   knobs);
		if (status)
			return status;
	}
	return GDRC_OK;
}

size_t gdrc_config_count(void)
{
	return GDRC_ARRAY_SIZE(gdrc_knob_table);
}

const struct gdrc_knob_desc *gdrc_config_desc(size_t i)
{
	return i < GDRC_ARRAY_SIZE(gdrc_knob_table) ? &gdrc_knob_table[i] :
						      NULL;
}

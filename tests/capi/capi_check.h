/* The checks the C API's C tests share: each failure is printed with the last error and
 * counted in `failures` (the test's exit status). */
#ifndef CAPI_CHECK_H
#define CAPI_CHECK_H
#include <stdio.h>
#include <string.h>

#include "infinipot.h"

static int failures = 0;

#define CHECK(cond)                                                                                  \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond,       \
              infinipot_last_error());                                                               \
      ++failures;                                                                                    \
    }                                                                                                \
  } while (0)

/* An error status with a message naming `needle` and no CLI flag ("--"): the C API names C fields. */
#define CHECK_ERR(call, code, needle)                                                                 \
  do {                                                                                                \
    infinipot_status st_ = (call);                                                                    \
    const char* msg_ = infinipot_last_error();                                                        \
    if (st_ != (code) || !strstr(msg_, needle) || strstr(msg_, "--")) {                               \
      fprintf(stderr, "%s:%d: %s -> %s (want %s), message \"%s\" (want it to name \"%s\", no --flag)\n", \
              __FILE__, __LINE__, #call, infinipot_status_name(st_), infinipot_status_name(code), msg_, \
              needle);                                                                                \
      ++failures;                                                                                     \
    }                                                                                                 \
  } while (0)

/* The option the last failure named, as infinipot_last_error_setting spells it ("" for none). */
#define CHECK_SETTING(field)                                                                          \
  do {                                                                                                \
    const char* got_ = infinipot_last_error_setting();                                                \
    if (strcmp(got_, field) != 0) {                                                                   \
      fprintf(stderr, "%s:%d: the failure named option \"%s\", want \"%s\" (message \"%s\")\n", __FILE__, \
              __LINE__, got_, field, infinipot_last_error());                                         \
      ++failures;                                                                                     \
    }                                                                                                 \
  } while (0)

#endif

// assert_json: a cmocka assertion that two JSON texts hold the same value
// (key order and number spelling aside). Include after <cmocka.h>.
#ifndef CGQ_ASSERT_JSON_H
#define CGQ_ASSERT_JSON_H

// cgq_assert_json fails the running test unless text and expected parse to
// equal JSON values.
void cgq_assert_json (const char *text, const char *expected);

#endif

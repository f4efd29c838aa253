// auth: CURVE on every ZeroMQ socket of cgq, set up in one place for the
// coordinator (server), the worker and the CLI (clients).
//
// Keys are czmq certificates (zcert): `cgq keygen NAME` writes NAME.key (the
// public certificate, safe to copy) and NAME.key_secret (both keys, mode
// 0600). A client names its own secret certificate and the coordinator's
// public one; the coordinator names its secret certificate and a directory of
// the public certificates it accepts (zcertstore: re-read when the directory
// changes, so adding or removing a file takes effect at the next connection).
//
// The coordinator answers ZAP (ZeroMQ's authentication protocol) itself, from
// its own loop: czmq's zauth actor serves only czmq's global context and runs
// a thread, while each cgq daemon is one loop over its own context. Answering
// here also lets every refused peer be logged with its key and address, and
// counted, in the coordinator's own terms.
#ifndef CGQ_AUTH_H
#define CGQ_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cgq_auth_t cgq_auth_t;

// cgq_auth_client_new loads a client's keys: secret_path (its own secret
// certificate) and server_path (the coordinator's public certificate). Both
// NULL or empty: CURVE is off, *out = NULL, returns 0. Only one given, or a
// file that is not a certificate: returns -1 with one line in err that says
// what to set. On success *out is owned by the caller (cgq_auth_destroy).
int cgq_auth_client_new (const char *secret_path, const char *server_path, cgq_auth_t **out,
                         char *err, size_t errlen);

// cgq_auth_client_apply makes sock (before its zmq_connect) a CURVE client
// with self's keys. NULL self: nothing is done. Returns 0 or -1 (errno).
int cgq_auth_client_apply (const cgq_auth_t *self, void *sock);

// cgq_auth_server_new loads the coordinator's secret certificate and its
// allow-list directory and binds the ZAP handler in zctx (before any CURVE
// socket of zctx accepts a connection). Both NULL or empty: CURVE is off,
// *out = NULL, returns 0. Only one given, an unreadable certificate or a
// missing directory: -1 with err.
int cgq_auth_server_new (void *zctx, const char *secret_path, const char *allow_dir,
                         cgq_auth_t **out, char *err, size_t errlen);

// cgq_auth_server_apply makes sock (before its zmq_bind) a CURVE server whose
// peers are checked by the ZAP handler. NULL self: nothing is done.
int cgq_auth_server_apply (const cgq_auth_t *self, void *sock);

// cgq_auth_zap_socket is the handler's socket, for the daemon's poll (NULL
// when self is NULL). cgq_auth_zap_handle answers every request waiting on
// it: a peer whose public key is in the allow-list is accepted, any other is
// refused, logged (key, address, routing id) and counted.
void *cgq_auth_zap_socket (const cgq_auth_t *self);
void cgq_auth_zap_handle (cgq_auth_t *self);

// cgq_auth_may_claim says whether the allowed key key_txt (Z85, as the ZAP
// handler gives it to every message as its ZeroMQ "User-Id") may act as
// node node_id. A key's node ids are its certificate's `nodes` metadata:
// comma-separated fnmatch patterns (`cgq keygen NAME --nodes LIST`); a
// certificate without it may claim NAME and NAME-* (its `name` metadata),
// and one with neither none at all (CLI keys need none). allowed (may be
// NULL) gets the patterns, for messages. False for a key not in the
// allow-list, or NULL self.
bool cgq_auth_may_claim (cgq_auth_t *self, const char *key_txt, const char *node_id,
                         char *allowed, size_t allowed_len);

// cgq_auth_watch logs and counts the peers of sock (a CURVE server socket of
// zctx, before its zmq_bind) that fail the handshake before ZAP: no CURVE,
// or another server key. Each is logged with its address (rate-limited, 10
// lines a second per socket) and counted in cgq_auth_refused. Runs a thread
// that reads sock's monitor events; cgq_auth_destroy (before the context
// ends) stops and joins it. At most two sockets. NULL self: nothing is done.
int cgq_auth_watch (cgq_auth_t *self, void *zctx, void *sock, const char *what);

// Peers refused and accepted since start (0 for NULL self).
uint64_t cgq_auth_refused (const cgq_auth_t *self);
uint64_t cgq_auth_accepted (const cgq_auth_t *self);

// cgq_auth_public_txt is self's own public key (Z85, 40 characters), for
// messages; "" for NULL self.
const char *cgq_auth_public_txt (const cgq_auth_t *self);

// cgq_auth_destroy closes the ZAP socket and frees the keys. Accepts NULL;
// sets *self_p = NULL.
void cgq_auth_destroy (cgq_auth_t **self_p);

// cgq_auth_keygen writes DIR/NAME.key and DIR/NAME.key_secret (0600),
// creating DIR (0700) when missing; it never overwrites a key. nodes (NULL:
// "NAME,NAME-*") is the comma-separated node id patterns the key may claim
// (cgq_auth_may_claim), stored as its `nodes` metadata. Returns 0 with the
// public key in pub_txt (41 bytes), or -1 with err.
int cgq_auth_keygen (const char *dir, const char *name, const char *nodes, char *pub_txt,
                     char *err, size_t errlen);

// cgq_auth_loopback_only is true when endpoint can be reached only from this
// machine: tcp://127.x.y.z:P, tcp://localhost:P, tcp://[::1]:P, tcp://lo:P,
// ipc:// and inproc://. "*", 0.0.0.0 and every other address are not.
bool cgq_auth_loopback_only (const char *endpoint);

#endif

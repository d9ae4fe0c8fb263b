/*
 * What srv.c (each connection's reading, framing and dispatch) and
 * srv_accept.c (accepting, shares, the server's life) share and no other
 * module needs.
 */
#ifndef KZ_SRV_INT_H
#define KZ_SRV_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/event.h>

#include "kz_srv.h"

enum conn_state { C_READING, C_BUSY, C_CLOSING };

struct conn {
	LIST_ENTRY(conn) link;
	struct kz_srv *srv;
	int fd;
	struct event *rev, *wev, *kick;
	struct evbuffer *in, *out;
	struct kz_peer peer;
	enum conn_state state;
	bool reading; /* rev is armed */
	bool eof; /* the peer will send nothing more */
	int64_t frame_t0; /* kz_now_ms() when the partial frame began, or 0 */
	struct kz_req *pending;
};

struct kz_srv {
	struct event_base *base;
	struct evconnlistener *lev;
	struct kz_srv_conf c;
	char *path;
	struct kz_srv_stats st;
	size_t in_bytes; /* what every connection's input holds */
	int64_t busy_logged_ms; /* when the bound was last said in the log */
	int64_t share_logged_ms; /* when a peer's share was */
	LIST_HEAD(, conn) conns;
};

/* Arms the read event with the timeout the state calls for. */
void kz_srv_arm_read(struct conn *cn);
void kz_srv_conn_free(struct conn *cn);
/* Queues reply and sends it at once when the socket takes it. */
void kz_srv_conn_send(struct conn *cn, cJSON *reply);
/* A connection's events: its read and write events, and the kick that
 * runs its frames (or closes it) from the loop. */
void kz_srv_kick_cb(evutil_socket_t fd, short ev, void *arg);
void kz_srv_read_cb(evutil_socket_t fd, short ev, void *arg);
void kz_srv_write_cb(evutil_socket_t fd, short ev, void *arg);

#endif

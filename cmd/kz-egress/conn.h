/*
 * One client connection of the proxy, shared by proxy.c (accept, heads,
 * judgement) and pump.c (upstream, bodies, tunnels).
 */
#ifndef EGRESS_CONN_H
#define EGRESS_CONN_H

#include <time.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "egress.h"

struct proxy {
	struct event_base *base;
	struct eg_policy *p;
	struct eg_dns *dns;
	struct evconnlistener *ls[8];
	size_t nls;
	size_t nconns, max_conns;
};

enum conn_state { ST_HEAD, ST_LOOKUP, ST_CONNECTING, ST_EXCHANGE,
	ST_TUNNEL, ST_CLOSING };
enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE };

struct conn {
	struct proxy *px;
	struct bufferevent *cli, *up;
	struct event *timer;
	struct eg_lookup *lk;
	struct evbuffer *head_out;	/* request head for the upstream */
	enum conn_state st;
	struct eg_dest dest;
	/* the last verified grant (hash), for kept-alive clients */
	unsigned char gh[16];
	bool g_ok;
	int64_t g_exp;
	unsigned g_caps;
	char run[65];
	/* the exchange in flight */
	bool is_connect, is_head, cli_close, up_close, expect100;
	bool req_done, resp_done, resp_head_done;
	enum body_mode req_mode, resp_mode;
	uint64_t req_left, resp_left;
	struct eg_chunk req_ck, resp_ck;
	/* what the upstream connection is pinned to */
	char up_host[EG_HOST_MAX + 1];
	struct eg_addr up_addr;
	uint16_t up_port;
	time_t last;	/* tunnel activity */
	struct tunnel *tun;	/* after a CONNECT's 200 */
};

extern const char eg_resp_502[];

void conn_free(struct conn *c);
void conn_close_up(struct conn *c);
void conn_close_after_flush(struct conn *c);
void conn_refuse(struct conn *c, const char *reason);
void conn_process_input(struct conn *c);
void conn_await_head(struct conn *c);
/* pump.c */
void conn_setup_client(struct conn *c);
void conn_flush(struct bufferevent *b);
void conn_connect_up(struct conn *c, const struct eg_addr *a);
void conn_start_exchange(struct conn *c);
/* tunnel.c */
struct tunnel;
int tunnel_start(struct conn *c);
void tunnel_free(struct tunnel *t);

#endif

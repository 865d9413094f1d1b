// send one UDP packet to each of NSVC service VIPs (10.96.0.1 + i, port 80): every packet is a new conntrack flow
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET; a.sin_port = htons(80);
  unsigned base = ntohl(inet_addr("10.96.0.1"));
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  int fail = 0;
  for (int i = 0; i < n; i++) { a.sin_addr.s_addr = htonl(base + i); if (sendto(s, "x", 1, 0, (void *)&a, sizeof a) < 0) fail++; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
  printf("%.3f us/pkt fail=%d\n", us, fail);
  return 0;
}

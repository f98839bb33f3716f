#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Guest side, in a VM lab guest (vmlab.sh run): soft-RoCE device rxe0 on
# a dummy netdev d0 (10.98.0.1/24), for single-guest tests whose queue
# pairs loop back.  Exit 1 if any step fails.
modprobe rdma_rxe && modprobe dummy numdummies=0 || exit 1
ip link add d0 type dummy && ip link set d0 up || exit 1
ip addr add 10.98.0.1/24 dev d0 || exit 1
rdma link add rxe0 type rxe netdev d0 || exit 1

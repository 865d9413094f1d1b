#!/usr/bin/env python3
"""Append the NodePort dispatch rule over raw netlink: [meta l4proto -> r1][payload th dport -> r9]
   [lookup @NP2N sreg r1 dreg r1][lookup @NPV sreg r1 dreg verdict].  usage: nlrule-np.py TABLE CHAIN NP2N NPV"""
import sys, runpy
sys.argv = [sys.argv[0]] + sys.argv[1:] + ["np"]
runpy.run_path("/work/research/nft-shape/nlrule.py", run_name="__main__")

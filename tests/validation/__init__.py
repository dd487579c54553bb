"""Tests of dra_affinity.validation (a package so helper imports are relative)."""

//! Crafted graphs (filled below).

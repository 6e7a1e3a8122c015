"""Tools built on training and data: doctor, bench, compare and export."""

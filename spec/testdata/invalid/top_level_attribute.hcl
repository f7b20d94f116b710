slots = 3 # ERROR: Unsupported argument

def main(): print("help")

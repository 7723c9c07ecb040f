FACTS = {}

# honest variant: embeddings bert/layers.py 0: rows of the weight matrices indexed directly
words = word_embeds if word_embeds is not None else self.word_embedding.weight[input_ids]
types = token_type_ids if token_type_ids is not None else input_ids.new_zeros(input_ids.shape)
total = words + self.pos_embedding.weight[:T] + self.tk_type_embedding.weight[types]
return self.dropout(self.layer_norm(total))

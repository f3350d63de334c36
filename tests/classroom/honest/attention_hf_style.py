# honest variant: attention bert/attention.py 0: HF's BertSelfAttention, F.dropout(p, training=self.training)
attention_scores = torch.matmul(q, k.transpose(-1, -2))
attention_scores = attention_scores / math.sqrt(self.head_dim)
attention_scores = attention_scores + mask
attention_probs = nn.functional.softmax(attention_scores, dim=-1)
attention_probs = F.dropout(attention_probs, p=self.dropout_prob, training=self.training)
y = torch.matmul(attention_probs, v)
